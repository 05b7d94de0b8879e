"""Traces and saved summaries are listed in the admin, read-only."""

import pytest

from tests.sessions_app.factories import SessionSummaryFactory, TraceFactory

pytestmark = pytest.mark.django_db


def test_trace_and_summary_lists_render(admin_client):
    trace = TraceFactory(model="gpt-4.1")
    SessionSummaryFactory()
    response = admin_client.get("/admin/sessions_app/trace/")
    assert response.status_code == 200
    assert str(trace.trace_id).encode() in response.content
    assert admin_client.get("/admin/sessions_app/sessionsummary/").status_code == 200


def test_traces_cannot_be_added_or_edited_in_the_admin(admin_client):
    trace = TraceFactory()
    assert admin_client.get("/admin/sessions_app/trace/add/").status_code == 403
    response = admin_client.post(
        f"/admin/sessions_app/trace/{trace.pk}/change/", {"model": "edited"}
    )
    assert response.status_code == 403
    trace.refresh_from_db()
    assert trace.model == "claude-sonnet-4"
