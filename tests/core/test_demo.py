"""`manage.py demo` tours the memory on a temporary database: every step runs through the
services, the figures it prints are the real ones, and the configured database is untouched."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.apps import apps
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from memoryproject.models import Project
from sessions_app.trace_writes import trace_record

# The temporary database replaces the connection's for the run: no test transaction around it.
pytestmark = pytest.mark.django_db(transaction=True)

STEPS = [
    "adr_episode",
    "migration_supersedes",
    "time_travel",
    "compile",
    "integrity",
    "contradiction",
    "session",
    "flagged_plan",
]


def _row_counts() -> dict[str, int]:
    return {m._meta.label: m._default_manager.count() for m in apps.get_models()}


def _demo(*args: str) -> str:
    out = StringIO()
    call_command("demo", *args, stdout=out)
    return out.getvalue()


def test_json_has_every_step_with_its_key_figures():
    steps = {s["name"]: s for s in json.loads(_demo("--json"))["steps"]}
    assert list(steps) == STEPS

    first = steps["adr_episode"]["fact_id"]
    migration = steps["migration_supersedes"]
    assert migration["superseded_ids"] == [first]
    assert migration["outcome"] == "active"

    travel = steps["time_travel"]
    assert travel["before"]["token_format"] == "JWT_HS256"
    assert travel["after"]["token_format"] == "PASETO_v4_public"
    assert travel["before"]["snapshot_hash"] != travel["after"]["snapshot_hash"]

    bundle = steps["compile"]
    assert 0 < bundle["token_count"] <= bundle["max_tokens"] == 160
    assert f"[FACT:{migration['fact_id']}]" in bundle["citations"]
    assert len(bundle["citations"]) >= 2
    assert bundle["suppressed_stale"] == 1 and bundle["injection_id"]

    integrity = steps["integrity"]
    assert integrity["verified"] is True
    assert len(integrity["merkle_root"]) == 64 and len(integrity["chain_head"]) == 64
    assert integrity["chain_size"] > 0

    conflict = steps["contradiction"]
    assert conflict["found_open"] == 1 and conflict["rule"] == "alias"
    assert conflict["fact_ids"] == [conflict["retired"], conflict["kept"]]
    assert conflict["auto_resolved"] == 1 and conflict["open_after"] == 0

    session = steps["session"]
    assert session["decision"] == "PASS" and session["found"] is True
    assert session["injection_id"]

    plan = steps["flagged_plan"]
    assert plan["status"] == "flagged" and plan["flagged_reason"]


def test_text_prints_every_step_and_leaves_the_configured_database_alone():
    project, _ = Project.objects.get_or_create(slug="default", defaults={"name": "Default"})
    trace_record(
        project=project,
        model="m",
        last_decision="keep the configured rows",
    )
    name = connection.settings_dict["NAME"]
    before = _row_counts()
    text = _demo()
    assert _row_counts() == before
    assert connection.settings_dict["NAME"] == name
    for number in range(1, len(STEPS) + 1):
        assert f"\n{number}. " in text
    assert "superseded: fact_" in text
    assert "verified: True" in text and "Merkle root" in text
    assert "1 resolved, 0 open" in text
    assert "status flagged" in text
    assert "dropped afterwards" in text


def test_unknown_argument_is_refused():
    with pytest.raises(CommandError, match="unrecognized arguments: --nope"):
        call_command("demo", "--nope")
