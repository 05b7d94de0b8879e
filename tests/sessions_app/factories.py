"""factory-boy factories for session memory."""

from __future__ import annotations

from datetime import timedelta

import factory

from memoryproject.models import Project
from memoryproject.timeutil import utcnow
from sessions_app.models import SESSION_SAVE_POLICY, SessionSummary, Trace

STRUCTURED_SUMMARY = """\
## Active project
memoryproject: the Django service that gives agents verified memory (sessions_app).

## Last decision
Store saved summaries as Trace rows with policy "session_save", so /v1/traces lists them.

## Current output
POST /v1/sessions/save and GET /v1/sessions/load work on SQLite and PostgreSQL; 42 tests pass.

## Open questions
- Should load fall back to an older summary when the newest one is low-trust?
- Is 14 days the right SESSION_MAX_AGE_DAYS default?

## Key files
- sessions_app/services.py
- sessions_app/domain/summary.py
"""

_FILLER = (
    "We worked on various things today and made some progress on the stuff we talked about. "
    "Things are going okay and basically everything is fine. There is still a lot to do and "
    "we will keep working on it as usual. "
)


def vague_summary(length: int) -> str:
    """Filler text of exactly ``length`` characters."""
    return (_FILLER * (length // len(_FILLER) + 1))[:length]


class ProjectFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Project
        django_get_or_create = ("slug",)

    slug = "default"
    name = factory.LazyAttribute(lambda o: o.slug)


class TraceFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Trace

    project = factory.SubFactory(ProjectFactory)
    created_at = factory.Sequence(lambda i: utcnow() - timedelta(hours=1) + timedelta(seconds=i))
    model = "claude-sonnet-4"
    policy = "agent"
    decision = "PASS"
    trust_score = 0.9
    risk = 0.1
    status_code = 200
    metadata = factory.Sequence(
        lambda i: {
            "active_project": "memoryproject",
            "last_decision": f"decision {i}",
            "current_output": f"output {i}",
            "open_questions": [f"question {i}?"],
            "key_files": ["sessions_app/services.py"],
        }
    )


class SessionSummaryFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = SessionSummary

    project = factory.SubFactory(ProjectFactory)
    trace = factory.SubFactory(
        TraceFactory,
        project=factory.SelfAttribute("..project"),
        policy=SESSION_SAVE_POLICY,
        model="",
        created_at=factory.SelfAttribute("..created_at"),
        trust_score=factory.SelfAttribute("..trust_score"),
        risk=factory.SelfAttribute("..risk"),
        decision=factory.SelfAttribute("..decision"),
    )
    summary = STRUCTURED_SUMMARY
    tokens = 100
    signals = factory.LazyFunction(dict)
    trust_score = 0.9
    risk = 0.1
    decision = "PASS"
    created_at = factory.LazyFunction(utcnow)
