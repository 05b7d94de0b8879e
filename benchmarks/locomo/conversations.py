"""LoCoMo conversations as episodes, following the protocol of the dataset's README: every
dialogue turn becomes one episode (its text, the image description when there is one, its
speaker as title and its session's date as ``occurred_at``), with the turn's ``dia_id`` as
external id and its session as the episode's stream (``metadata: {"stream", "position"}``).
Questions of categories 1-4 keep their evidence ``dia_id``s and their answer (read only to
score the delivered context, never ingested); summaries, observations and event annotations
are never read. Each conversation goes into its own temporary project.
"""

from __future__ import annotations

import json
import secrets
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tqdm import tqdm

from graph_app.episode_writes import episode_record
from graph_app.index_cache import compiler_cache_forget
from graph_app.models import Episode
from memoryproject.models import Project
from memoryproject.writes import write_transaction

CATEGORIES = (1, 2, 3, 4)
DATE_FORMAT = "%I:%M %p on %d %B, %Y"  # "1:56 pm on 8 May, 2023"


def _session_date(value: str) -> datetime:
    return datetime.strptime(value.strip(), DATE_FORMAT).replace(tzinfo=UTC)


def conversation_turns(data: dict[str, Any], name: str) -> list[dict[str, Any]]:
    """Episode arguments for every turn of a conversation, in order."""
    turns: list[dict[str, Any]] = []
    session = 1
    while f"session_{session}" in data:
        when = _session_date(data[f"session_{session}_date_time"])
        for position, turn in enumerate(data[f"session_{session}"]):
            content = turn["text"]
            if turn.get("blip_caption"):
                content += f" [shares an image: {turn['blip_caption']}]"
            turns.append(
                {
                    "title": turn["speaker"],
                    "category": "session_note",
                    "content": content,
                    "occurred_at": when,
                    "external_id": turn["dia_id"],
                    "metadata": {"stream": f"{name}/session_{session}", "position": position},
                }
            )
        session += 1
    return turns


def conversation_questions(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Questions of categories 1-4 with their evidence ``dia_id``s (an entry such as
    "D8:6; D9:17" names two turns) and their answer; questions without evidence cannot be
    scored."""
    questions = []
    for qa in data["qa"]:
        if qa.get("category") not in CATEGORIES:
            continue
        evidence = {part.strip() for entry in qa.get("evidence", []) for part in entry.split(";")}
        evidence.discard("")
        if evidence:
            questions.append(
                {
                    "question": qa["question"],
                    "evidence": evidence,
                    "category": qa["category"],
                    "answer": qa.get("answer", ""),
                }
            )
    return questions


def conversation_ingest(
    path: Path, *, disable: bool | None
) -> tuple[Project, dict[str, Any], list[dict], dict[str, str]]:
    """A temporary project holding the conversation's turns: (project, episode id -> dia_id,
    questions, dia_id -> the turn's text as recorded)."""
    name = path.stem
    data = json.loads(path.read_text())
    project = Project.objects.create(
        slug=f"locomo-eval-{name}-{secrets.token_hex(4)}", name=f"LoCoMo eval {name}"
    )
    with write_transaction():
        for turn in tqdm(conversation_turns(data, name), desc=f"{name} ingest", disable=disable):
            episode_record(project=project, **turn)
    rows = Episode.objects.filter(project=project).values_list("id", "external_id", "content")
    external = {pk: dia_id for pk, dia_id, _ in rows}
    texts = {dia_id: content for _, dia_id, content in rows if dia_id}
    return project, external, conversation_questions(data), texts


def conversation_drop(project: Project) -> None:
    compiler_cache_forget(project.pk)
    project.delete()
