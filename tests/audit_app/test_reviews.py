"""The review queue: flagged plans and loads refused on trust wait for a person; an approved
context is delivered once on the next call, receipted; a rejected one never is; decisions are
events of the hash-chained log; only holders of audit_app.decide_review may decide."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from django.contrib.auth.models import Permission, User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from audit_app.erasure import erase
from audit_app.findings import contradictions_audit
from audit_app.models import ContradictionFinding, InjectionRecord, Review
from audit_app.reviews import review_decide, review_open
from audit_app.selectors import injection_log_verify
from graph_app.fact_writes import fact_upsert
from memoryproject.contracts import Caller
from memoryproject.models import Project
from sessions_app.models import Trace
from sessions_app.plan import plan_context
from tests.background import committed_project
from tests.mcp.conftest import McpRunner, server_env, structured
from tests.sessions_app.factories import SessionSummaryFactory, TraceFactory

pytestmark = pytest.mark.django_db

THREADS = 6
REVIEWS = "/admin/audit_app/review/"
FINDINGS = "/admin/audit_app/findingreview/"


def staff(username: str, *perms: str) -> Client:
    user = User.objects.create_user(username, password="pw", is_staff=True)
    for codename in perms:
        user.user_permissions.add(Permission.objects.get(codename=codename))
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def reviewer() -> Client:
    return staff("rita", "decide_review", "view_review")


@pytest.fixture
def low_trust(default_project):
    # One trace: p=1, Ue=0.2, Ua=0.1 -> trust 0.70, below the default threshold 0.75.
    return TraceFactory(project=default_project, trust_score=0.9, risk=0.1)


def flagged_plan(api) -> dict:
    body = api.post("/v1/plan", {}, format="json").json()
    assert body["status"] == "flagged", body
    return body


def decide(client: Client, review_id: int, decision: str, reason: str = "checked the traces"):
    return client.post(f"{REVIEWS}{review_id}/decide/", {"decision": decision, "reason": reason})


def review_events() -> list[InjectionRecord]:
    return list(InjectionRecord.objects.filter(source="review").order_by("seq"))


def test_a_flagged_plan_waits_in_the_queue_with_reason_score_signals_and_text(
    api, low_trust, reviewer
):
    body = flagged_plan(api)
    review = Review.objects.get()
    assert body["review_id"] == review.pk
    assert (review.state, review.source, review.flagged_injection_id) == (
        "open",
        "plan",
        body["injection_id"],
    )
    assert review.reason == body["flagged_reason"]
    assert (review.trust_score, review.threshold) == (body["trust_score"], 0.75)
    assert review.signals == body["signals"]
    assert review.text.startswith("SESSION_CONTEXT: (trust=0.70")
    assert review.items == [
        {"kind": "trace", "id": str(low_trust.trace_id), "sha256": review.items[0]["sha256"]}
    ]

    # The same flagged context asked for again is not queued twice.
    assert flagged_plan(api)["review_id"] == review.pk
    assert Review.objects.count() == 1

    listing = reviewer.get(REVIEWS).content.decode()
    assert "Trust score 0.7000 below threshold 0.7500" in listing
    page = reviewer.get(f"{REVIEWS}{review.pk}/change/").content.decode()
    assert 'id="review-text"' in page and "Active project: «memoryproject" in page
    assert 'id="review-decision-form"' in page and "0.7" in page
    assert f"/admin/audit_app/injectionrecord/{body['injection_id']}/change/" in page


def test_an_approved_context_is_delivered_once_on_the_next_plan_receipted(api, low_trust, reviewer):
    review = Review.objects.get(pk=flagged_plan(api)["review_id"])
    response = decide(reviewer, review.pk, "approve", "the traces are ours, context is right")
    assert response.status_code == 302
    review.refresh_from_db()
    assert (review.state, review.decided_by) == ("approved", "rita")
    event = review_events()[-1]
    assert event.seq == review.decision_seq and event.project_id == review.project_id
    assert event.request["decision"] == "approved"
    assert event.request["reason"] == "the traces are ours, context is right"

    delivered = api.post("/v1/plan", {}, format="json").json()
    assert delivered["status"] == "injected"
    assert (delivered["approved_by"], delivered["review_id"]) == ("rita", review.pk)
    assert delivered["system_prompt"] == review.text
    assert delivered["trust_score"] == review.trust_score
    receipt = InjectionRecord.objects.get(pk=delivered["injection_id"])
    assert (receipt.source, receipt.status, receipt.mode) == ("plan", "injected", "approved")
    assert receipt.system_prompt == review.text
    assert (receipt.request["review_id"], receipt.request["approved_by"]) == (review.pk, "rita")
    assert receipt.items == review.items
    review.refresh_from_db()
    assert (review.state, review.delivered_injection_id) == ("delivered", receipt.pk)

    # Exactly once: the next plan is computed afresh (and flagged again).
    again = api.post("/v1/plan", {}, format="json").json()
    assert again["status"] == "flagged" and "approved_by" not in again
    assert injection_log_verify().ok


def test_a_rejected_context_is_never_delivered(api, low_trust, reviewer):
    review = Review.objects.get(pk=flagged_plan(api)["review_id"])
    assert decide(reviewer, review.pk, "reject", "not our project").status_code == 302
    review.refresh_from_db()
    assert review.state == "rejected"
    assert review_events()[-1].request["decision"] == "rejected"
    for _ in range(3):
        body = api.post("/v1/plan", {}, format="json").json()
        assert body["status"] == "flagged" and "approved_by" not in body
    assert not InjectionRecord.objects.filter(status="injected").exists()
    # A decided review cannot be decided again.
    decide(reviewer, review.pk, "approve")
    review.refresh_from_db()
    assert review.state == "rejected" and len(review_events()) == 1
    assert injection_log_verify().ok


def test_the_reason_is_mandatory(api, low_trust, reviewer):
    review = Review.objects.get(pk=flagged_plan(api)["review_id"])
    response = decide(reviewer, review.pk, "approve", "   ")
    assert response.status_code == 302
    page = reviewer.get(response["Location"]).content.decode()
    assert "reason" in page and "required" in page.lower()
    review.refresh_from_db()
    assert review.state == "open" and review_events() == []


def test_staff_without_the_review_permission_cannot_decide(api, low_trust):
    review = Review.objects.get(pk=flagged_plan(api)["review_id"])
    viewer = staff("victor", "view_review")
    page = viewer.get(f"{REVIEWS}{review.pk}/change/")
    assert page.status_code == 200 and b'id="review-decision-form"' not in page.content
    assert decide(viewer, review.pk, "approve").status_code == 403
    assert decide(staff("nora"), review.pk, "approve").status_code == 403
    review.refresh_from_db()
    assert review.state == "open" and review_events() == []
    assert api.post("/v1/plan", {}, format="json").json()["status"] == "flagged"


def test_a_dry_run_neither_queues_nor_takes_an_approved_context(api, low_trust, reviewer):
    dry = api.post("/v1/plan", {"mode": "dry_run"}, format="json").json()
    assert "review_id" not in dry and not Review.objects.exists()
    review = Review.objects.get(pk=flagged_plan(api)["review_id"])
    decide(reviewer, review.pk, "approve")
    assert api.post("/v1/plan", {"mode": "dry_run"}, format="json").json()["status"] == "flagged"
    assert api.post("/v1/plan", {}, format="json").json()["approved_by"] == "rita"


def test_an_approved_context_whose_sources_changed_is_voided_not_delivered(
    api, low_trust, reviewer
):
    review = Review.objects.get(pk=flagged_plan(api)["review_id"])
    decide(reviewer, review.pk, "approve")
    erase(target="trace", ref=str(low_trust.trace_id), reason="asked to forget", by="dpo")
    body = api.post("/v1/plan", {}, format="json").json()
    assert "approved_by" not in body
    review.refresh_from_db()
    assert review.state == "void" and "erased" in review.note
    assert review.text == "[erased]"


def test_a_load_refused_on_trust_is_queued_and_delivered_once_when_approved(
    client_for, default_project, reviewer
):
    reader = client_for("read")
    summary = SessionSummaryFactory(trust_score=0.3, risk=0.7, decision="ESCALATE")
    refused = reader.get("/v1/sessions/load").json()
    assert refused["found"] is False and refused["rule"] == "threshold"
    review = Review.objects.get(pk=refused["review_id"])
    assert (review.source, review.flagged_injection_id) == ("load", None)
    assert review.reason == refused["reason"]
    assert not InjectionRecord.objects.exists()  # a refusal delivers nothing: no receipt

    decide(reviewer, review.pk, "approve", "low score, but the summary is accurate")
    loaded = reader.get("/v1/sessions/load").json()
    assert loaded["found"] is True
    assert (loaded["approved_by"], loaded["review_id"]) == ("rita", review.pk)
    assert loaded["trace_id"] == str(summary.trace.trace_id)
    assert loaded["system_prompt"] == review.text
    receipt = InjectionRecord.objects.get(pk=loaded["injection_id"])
    assert (receipt.source, receipt.status, receipt.mode) == ("load", "injected", "approved")
    assert receipt.request["review_id"] == review.pk

    again = reader.get("/v1/sessions/load").json()
    assert again["found"] is False and "approved_by" not in again
    assert injection_log_verify().ok


def test_every_door_gets_the_approved_context_through_the_same_service(
    default_project, low_trust, reviewer
):
    flagged = plan_context(project=default_project, channel="mcp", client="claude-code")
    decide(reviewer, flagged["review_id"], "approve")
    delivered = plan_context(project=default_project, channel="cli", client="me")
    assert (delivered["status"], delivered["approved_by"]) == ("injected", "rita")
    receipt = InjectionRecord.objects.get(pk=delivered["injection_id"])
    assert receipt.channel == "cli"


@pytest.fixture
def finding(default_project) -> ContradictionFinding:
    for predicate, value, since in (
        ("uses_token_format", "JWT_HS256", "2026-01-10T00:00:00Z"),
        ("token_format", "PASETO_v4_public", "2026-04-20T00:00:00Z"),
    ):
        fact_upsert(
            project=default_project,
            subject_id="payments-service",
            predicate=predicate,
            object_value=value,
            valid_from=since,
        )
    contradictions_audit(project=default_project, channel="cli", client="cron")
    return ContradictionFinding.objects.get()


def test_a_contradiction_finding_is_resolved_with_a_reason_and_logged(finding, reviewer):
    listing = reviewer.get(FINDINGS).content.decode()
    assert "payments-service" in listing
    page = reviewer.get(f"{FINDINGS}{finding.pk}/change/").content.decode()
    assert 'id="review-decision-form"' in page
    url = f"{FINDINGS}{finding.pk}/decide/"
    reviewer.post(url, {"decision": "dismissed", "reason": ""})
    finding.refresh_from_db()
    assert finding.state == "open"
    reviewer.post(url, {"decision": "resolved", "reason": "PASETO is current, JWT retired"})
    finding.refresh_from_db()
    assert (finding.state, finding.settled_by) == ("resolved", "rita")
    event = review_events()[-1]
    assert (event.request["subject"], event.request["finding_id"]) == ("finding", finding.pk)
    assert event.request["decision"] == "resolved"
    assert injection_log_verify().ok
    assert "payments-service" not in reviewer.get(FINDINGS).content.decode()


def test_a_finding_cannot_be_settled_without_the_review_permission(finding):
    viewer = staff("victor", "view_contradictionfinding")
    page = viewer.get(f"{FINDINGS}{finding.pk}/change/")
    assert page.status_code == 200 and b'id="review-decision-form"' not in page.content
    url = f"{FINDINGS}{finding.pk}/decide/"
    assert viewer.post(url, {"decision": "dismissed", "reason": "x"}).status_code == 403
    finding.refresh_from_db()
    assert finding.state == "open" and review_events() == []


@pytest.fixture
def committed_flagged():
    with committed_project("review-race") as project:
        TraceFactory(project=project, trust_score=0.9, risk=0.1)
        try:
            yield project
        finally:
            Review.objects.filter(project=project).delete()
    Trace.objects.filter(project=project).delete()
    Project.objects.filter(pk=project.pk).delete()


@pytest.mark.django_db(transaction=True, available_apps=["audit_app", "sessions_app"])
def test_concurrent_plans_deliver_an_approved_context_exactly_once(committed_flagged):
    caller = Caller(channel="test", client="race")
    flagged = plan_context(project=committed_flagged, caller=caller)
    review_decide(review_id=flagged["review_id"], decision="approve", by="rita", reason="ok")
    start = threading.Barrier(THREADS)
    results: list[dict] = []
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            start.wait()
            results.append(plan_context(project=committed_flagged, caller=caller))
        except BaseException as exc:  # an exception in a thread is otherwise lost
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    approved = [r for r in results if r.as_json().get("approved_by") == "rita"]
    assert len(results) == THREADS and len(approved) == 1
    assert (
        Review.objects.get(pk=flagged["review_id"]).delivered_injection_id
        == (approved[0]["injection_id"])
    )
    assert injection_log_verify().ok


def queue(project: Project, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        review_open(
            project=project,
            source="plan",
            reason=f"Trust score 0.{i:04d} below threshold 0.7500. Manual review recommended.",
            trust_score=0.5,
            risk=0.5,
            threshold=0.75,
            decision="REFINE",
            signals={},
            context={},
            trace_ids=[],
            items=[],
            text=f"SESSION_CONTEXT: {i}",
        )


def test_the_queue_pages_cost_a_fixed_number_of_queries(reviewer, default_project):
    billing = Project.objects.create(slug="billing", name="billing")
    reviewer.get(REVIEWS)  # sessions, content types: warm

    def queries(url: str) -> int:
        with CaptureQueriesContext(connection) as captured:
            assert reviewer.get(url).status_code == 200
        return len(captured.captured_queries)

    queue(default_project, 3)
    few = queries(REVIEWS)
    queue(billing, 40, start=3)
    assert queries(REVIEWS) == few
    assert queries(f"{REVIEWS}?state=all&source=plan") == few
    assert Review.objects.filter(state="open").count() == 43


@pytest.fixture
def mcp_server(transactional_db, tmp_path) -> Iterator[McpRunner]:
    yield McpRunner(server_env(), tmp_path / "mcp_serve.stderr")
    connection.close()  # so the flush after the test does not wait on it


@pytest.mark.slow
def test_the_mcp_tool_delivers_the_approved_context_once(mcp_server):
    project, _ = Project.objects.get_or_create(slug="default", defaults={"name": "default"})
    TraceFactory(project=project, trust_score=0.9, risk=0.1)

    async def plan(session):
        return structured(await session.call_tool("plan_context", {}))

    flagged = mcp_server(plan)
    assert flagged["status"] == "flagged"
    review_decide(review_id=flagged["review_id"], decision="approve", by="rita", reason="ok")

    async def twice(session):
        return await plan(session), await plan(session)

    delivered, after = mcp_server(twice)
    assert (delivered["status"], delivered["approved_by"]) == ("injected", "rita")
    assert delivered["review_id"] == flagged["review_id"]
    assert after["status"] == "flagged" and "approved_by" not in after
    receipt = InjectionRecord.objects.get(pk=delivered["injection_id"])
    assert (receipt.channel, receipt.mode, receipt.status) == ("mcp", "approved", "injected")
    assert injection_log_verify().ok


def test_a_review_stored_before_a_signal_existed_is_still_delivered(api, low_trust, reviewer):
    # A review queued before the plan's signals gained a field: the stored signals lack it
    # (and hold one the model no longer accepts as it was stored).
    review = Review.objects.get(pk=flagged_plan(api)["review_id"])
    stored = {k: v for k, v in review.signals.items() if k != "fields_present"}
    stored["traces_used"] = "one"
    Review.objects.filter(pk=review.pk).update(signals=stored, context={"active_project": 7})
    assert decide(reviewer, review.pk, "approve").status_code == 302

    response = api.post("/v1/plan", {}, format="json")
    assert response.status_code == 200, response.content
    delivered = response.json()
    assert (delivered["status"], delivered["review_id"]) == ("injected", review.pk)
    assert delivered["system_prompt"] == review.text
    signals = delivered["signals"]
    assert signals["fields_present"] == [] and signals["traces_used"] == 0
    assert signals["not_recorded"] == ["fields_present", "traces_used"]
    assert signals["p"] == review.signals["p"]  # what was recorded is delivered as recorded
    assert delivered["context"]["active_project"] is None
    assert injection_log_verify().ok
