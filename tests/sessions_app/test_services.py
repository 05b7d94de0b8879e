"""The services validate their own arguments, so MCP and other callers get REST's errors, and
they receipt injections with the caller's channel and client."""

import pytest

from audit_app.models import InjectionRecord
from memoryproject.errors import ApplicationError
from sessions_app.models import SessionSummary, Trace
from sessions_app.plan import plan_context
from sessions_app.session_memory import session_load, session_save
from sessions_app.trace_writes import trace_record
from tests.sessions_app.factories import STRUCTURED_SUMMARY, SessionSummaryFactory, TraceFactory

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"n": 0}, "n"),
        ({"n": "5"}, "n"),
        ({"trust_threshold": 2}, "trust_threshold"),
        ({"trust_threshold": float("nan")}, "trust_threshold"),
        ({"mode": "AUTO"}, "mode"),
        ({"channel": ""}, "channel"),
        ({"client": 7}, "client"),
    ],
)
def test_plan_context_rejects_bad_arguments_naming_the_field(default_project, kwargs, field):
    with pytest.raises(ApplicationError) as error:
        plan_context(project=default_project, **kwargs)
    assert error.value.field == field
    assert InjectionRecord.objects.count() == 0


def test_plan_context_receipts_the_mcp_channel_and_client_name(default_project):
    TraceFactory(project=default_project)
    body = plan_context(project=default_project, channel="mcp", client="claude-code")
    record = InjectionRecord.objects.get(pk=body["injection_id"])
    assert (record.channel, record.client) == ("mcp", "claude-code")


def test_session_load_receipts_the_mcp_channel_and_client_name(default_project):
    SessionSummaryFactory()
    body = session_load(project=default_project, channel="mcp", client="cursor")
    record = InjectionRecord.objects.get(pk=body["injection_id"])
    assert (record.source, record.channel, record.client) == ("load", "mcp", "cursor")


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"threshold": 1.5}, "threshold"),
        ({"threshold": None}, "threshold"),
        ({"max_age_days": 0}, "max_age_days"),
        ({"max_age_days": 3651}, "max_age_days"),
        ({"channel": None}, "channel"),
    ],
)
def test_session_load_rejects_bad_arguments_naming_the_field(default_project, kwargs, field):
    SessionSummaryFactory()
    with pytest.raises(ApplicationError) as error:
        session_load(project=default_project, **kwargs)
    assert error.value.field == field
    assert InjectionRecord.objects.count() == 0


def test_session_save_rejects_non_text(default_project):
    with pytest.raises(ApplicationError) as error:
        session_save(project=default_project, summary=None)  # type: ignore[arg-type]
    assert error.value.field == "summary"
    assert SessionSummary.objects.count() == 0


def test_session_save_links_the_summary_to_its_trace(default_project):
    body = session_save(project=default_project, summary=STRUCTURED_SUMMARY)
    summary = SessionSummary.objects.get()
    assert str(summary.trace.trace_id) == body["trace_id"]
    assert summary.trace.trust_score == summary.trust_score == body["trust_score"]
    assert summary.signals == body["signals"]


def test_a_saved_summary_feeds_the_next_plan(default_project):
    session_save(project=default_project, summary=STRUCTURED_SUMMARY)
    body = plan_context(project=default_project, mode="dry_run")
    assert body["context"]["active_project"].startswith("memoryproject:")
    assert body["context"]["last_decision"].startswith("Store saved summaries")


def test_trace_record_keeps_unknown_fields_in_metadata(default_project):
    body = trace_record(project=default_project, tool="pytest", last_decision="d")
    assert body["metadata"] == {"tool": "pytest", "last_decision": "d"}
    assert Trace.objects.get().metadata["tool"] == "pytest"
