"""In Chromium, a compliance officer works the audit console end to end: the dashboard's charts
total the deliveries an agent received over real HTTP, the injection log filters by decision
and date and finds a trace id, a delivery record answers "what did the agent get?" and links to
its trace, a flagged context approved in the review queue is delivered on the agent's next
plan call, and the exported CSV carries the log's head hash."""

from __future__ import annotations

import csv
import io
from datetime import timedelta
from typing import Any

import pytest
import time_machine

from tests.e2e.conftest import log_in, screenshot

pytestmark = pytest.mark.slow

GOOD_TRACE = {
    "model": "claude-sonnet-4",
    "policy": "agent",
    "active_project": "billing-service",
    "last_decision": "retry webhooks with exponential backoff, max 5 attempts",
    "current_output": "retry queue in billing/webhooks.py, 12 tests passing",
    "open_questions": ["cap retries at 5?"],
}
BAD_TRACE = {
    "model": "claude-sonnet-4",
    "policy": "agent",
    "status_code": 500,
    "current_output": "x",
}


def _deliveries(api) -> dict[str, Any]:
    """Three days ago a trusted context was injected (PASS); today an untrusted one was flagged
    (ESCALATE, queued for review) and a dry run was flagged too."""
    from memoryproject.timeutil import utcnow

    with time_machine.travel(utcnow() - timedelta(days=3), tick=True):
        good = api.post("/v1/traces", GOOD_TRACE)
        injected = api.post("/v1/plan", {})
    bad = api.post("/v1/traces", BAD_TRACE)
    flagged = api.post("/v1/plan", {"n": 1})
    dry_run = api.post("/v1/plan", {"mode": "dry_run"})
    assert (injected["status"], injected["decision"]) == ("injected", "PASS"), injected
    assert (flagged["status"], flagged["decision"]) == ("flagged", "ESCALATE"), flagged
    assert flagged.get("review_id") is not None, flagged
    assert dry_run["status"] == "flagged" and dry_run.get("review_id") is None, dry_run
    return {
        "good": good,
        "bad": bad,
        "injected": injected,
        "flagged": flagged,
        "dry_run": dry_run,
    }


def _rows(page) -> list[str]:
    """The injection ids of the log's rows, as their links say."""
    hrefs = page.locator("#result_list tbody tr th a").evaluate_all(
        "links => links.map(a => a.getAttribute('href'))"
    )
    return sorted(href.split("/injectionrecord/")[1].split("/")[0] for href in hrefs)


def _filter(page, title: str, choice: str) -> None:
    """Clicks ``choice`` under the changelist's filter "By <title>"."""
    block = page.locator(f'#changelist-filter details[data-filter-title="{title}"]')
    with page.expect_navigation():
        block.get_by_role("link", name=choice, exact=True).click()


def _ids(*results: dict[str, Any]) -> list[str]:
    return sorted(str(r["injection_id"]) for r in results)


def test_officer_reviews_the_dashboard_log_record_queue_and_export(page, step, officer, api):
    from audit_app.models import InjectionLogHead
    from memoryproject.timeutil import utcnow

    with step("record deliveries through the REST API with a real key"):
        sent = _deliveries(api)
        now = utcnow()

    with step("log in as a compliance officer"):
        log_in(page)
        assert page.locator("#console-links").is_visible()
        screenshot(page, "admin-index")

    with step("open the dashboard and check the charts show the expected totals"):
        page.locator("#link-dashboard").click()
        page.wait_for_selector("body[data-charts-ready='true']")
        totals = {
            name: page.locator(f"#total-{name}").inner_text().strip()
            for name in ("deliveries", "injected", "flagged", "empty")
        }
        assert totals == {"deliveries": "3", "injected": "1", "flagged": "2", "empty": "0"}
        assert page.locator("#open-reviews").inner_text().strip() == "1"
        drawn = page.evaluate(
            """() => {
              const charts = window.dashboardCharts;
              const sum = (values) => values.reduce((a, b) => a + (b || 0), 0);
              const byStatus = {};
              charts.deliveries.data.datasets.forEach(d => { byStatus[d.label] = sum(d.data); });
              return {
                byStatus: byStatus,
                trust: sum(charts.trust.data.datasets[0].data),
                clients: sum(charts.clients.data.datasets[0].data),
                painted: document.getElementById('chart-deliveries').width > 0,
              };
            }"""
        )
        assert drawn["byStatus"].get("injected") == 1 and drawn["byStatus"].get("flagged") == 2
        assert sum(drawn["byStatus"].values()) == 3
        assert drawn["trust"] == 3 and drawn["clients"] == 3 and drawn["painted"]
        # The chain status is fetched after the page loads (verifying walks the whole log).
        page.wait_for_selector("#chain-status[data-verified]")
        assert page.locator("#chain-status").get_attribute("data-verified") == "true"
        screenshot(page, "dashboard", readme=True)

    with step("filter the injection log by decision"):
        page.goto("/admin/audit_app/injectionrecord/")
        assert page.locator("#chain-status").get_attribute("data-verified") == "true"
        _filter(page, "decision", "PASS")
        assert _rows(page) == _ids(sent["injected"])
        _filter(page, "decision", "ESCALATE")
        assert _rows(page) == _ids(sent["flagged"], sent["dry_run"])
        screenshot(page, "injection-log-filtered")

    with step("filter the injection log by date (UTC, to the second)"):
        _filter(page, "decision", "All")
        earlier = (now - timedelta(days=4)).strftime("%Y-%m-%dT%H:%M:%S")
        later = (now - timedelta(days=2)).strftime("%Y-%m-%dT%H:%M:%S")
        page.get_by_label("From (UTC)").fill(earlier)
        page.get_by_label("To (UTC, inclusive)").fill(later)
        page.locator("#created-range-apply").click()
        page.wait_for_url("**created_from=*")
        assert _rows(page) == _ids(sent["injected"])
        with page.expect_navigation():
            page.locator("#created-range-clear").click()
        assert _rows(page) == _ids(sent["injected"], sent["flagged"], sent["dry_run"])

    trace_id = sent["good"]["trace_id"]
    with step("search the log for a trace id"):
        page.locator("#searchbar").fill(trace_id)
        page.locator("#searchbar").press("Enter")
        page.wait_for_url("**q=*")
        # The trusted trace went into the injected plan and into the dry run.
        assert _rows(page) == _ids(sent["injected"], sent["dry_run"])

    with step("open a delivery record: what did the agent get?"):
        record_id = sent["injected"]["injection_id"]
        page.locator(f'#result_list a[href*="/injectionrecord/{record_id}/change/"]').click()
        page.wait_for_selector("#delivery")
        assert page.locator("#delivery-status").inner_text().strip() == "injected"
        assert page.locator("#delivery-decision").inner_text().strip() == "PASS"
        delivered = page.locator("#delivered-text").inner_text()
        assert delivered.strip() == sent["injected"]["system_prompt"].strip()
        source = page.locator(f'#delivery-sources tr[data-item-id="{trace_id}"]')
        assert source.locator(".source-changed-cell").inner_text().strip() == "unchanged"
        screenshot(page, "delivery-record", readme=True)

    with step("follow the record's link to its trace"):
        source.locator("a.source-link").click()
        page.wait_for_url("**/admin/sessions_app/trace/**")
        assert trace_id in page.locator("#content").inner_text()
        screenshot(page, "trace")

    review_id = sent["flagged"]["review_id"]
    with step("approve the flagged context in the review queue, with a reason"):
        page.goto("/admin/")
        page.locator("#link-review-queue").click()
        page.locator(f'#result_list a[href*="/review/{review_id}/change/"]').first.click()
        page.wait_for_selector("#review-decision-form")
        screenshot(page, "review-flagged-context")
        page.get_by_label("Approve: deliver on the next call").check()
        page.get_by_label("Reason").fill("Checked with the team: the crash trace is accurate.")
        page.locator("#review-decide").click()
        page.wait_for_selector(".messagelist")
        assert "Decision recorded: approve" in page.locator(".messagelist").inner_text()
        assert page.locator("#review-decision-form").count() == 0

    with step("the agent's next plan call receives the approved context, once"):
        delivered = api.post("/v1/plan", {"n": 1})
        assert delivered["status"] == "injected", delivered
        assert delivered["review_id"] == review_id, delivered
        assert delivered["approved_by"] == "officer", delivered
        again = api.post("/v1/plan", {"n": 1})
        assert again["status"] == "flagged" and again.get("approved_by") is None, again

    with step("export the ESCALATE records as CSV and check the head hash"):
        page.goto("/admin/audit_app/injectionrecord/?decision__exact=ESCALATE")
        shown = _rows(page)
        head_on_page = page.locator("#chain-head-hash").inner_text().strip()
        page.get_by_role("link", name="Export").click()
        page.get_by_role("combobox", name="Format").select_option(label="csv")
        screenshot(page, "export")
        with page.expect_download() as download:
            page.get_by_role("button", name="Submit").click()
        body = download.value.path().read_text(encoding="utf-8")
        rows = list(csv.DictReader(io.StringIO(body)))
        head = InjectionLogHead.objects.get(pk=1)
        assert sorted(r["id"] for r in rows) == shown
        assert {r["decision"] for r in rows} == {"ESCALATE"}
        assert {r["log_head_hash"] for r in rows} == {head.last_hash}
        assert head_on_page == head.last_hash
        assert {r["log_head_seq"] for r in rows} == {str(head.seq)}
