"""In Chromium, a compliance officer browses an entity of the knowledge graph and moves the as-of
date back to see the fact that has since been superseded."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import log_in, screenshot

pytestmark = pytest.mark.slow

G = "/v1/graph"


def _graph(api) -> None:
    """auth_service: JWT from January, PASETO from April 20 (superseding it); it depends on
    key_vault, which depends on hsm_cluster; one ADR tells the story."""
    for value, since in (("JWT_HS256", "2026-01-10"), ("PASETO_v4_public", "2026-04-20")):
        api.post(
            f"{G}/facts",
            {
                "subject_id": "auth_service",
                "predicate": "uses_token_format",
                "object_value": value,
                "valid_from": f"{since}T00:00:00Z",
            },
        )
    for subject, target in (("auth_service", "key_vault"), ("key_vault", "hsm_cluster")):
        api.post(
            f"{G}/facts",
            {
                "subject_id": subject,
                "predicate": "depends_on",
                "object_entity": target,
                "singular": False,
                "valid_from": "2026-01-01T00:00:00Z",
            },
        )
    api.post(
        f"{G}/entities",
        {"entity_id": "auth_service", "kind": "service", "name": "Authentication service"},
    )
    api.post(
        f"{G}/episodes",
        {
            "category": "adr",
            "title": "Move tokens to PASETO v4",
            "content": "HS256 secrets were shared across services; PASETO v4 public keys are not.",
            "entities_mentioned": ["auth_service"],
            "occurred_at": "2026-04-20T09:00:00Z",
            "external_id": "ADR-12",
        },
    )


def test_officer_moves_the_as_of_date_back_and_sees_the_superseded_fact(page, step, officer, api):
    with step("record the graph through the REST API"):
        _graph(api)

    with step("log in as a compliance officer"):
        log_in(page)

    with step("open the memory browser from the admin index and search the entity"):
        page.locator("#link-memory-browser").click()
        page.get_by_label("Entity id or name contains").fill("auth")
        with page.expect_navigation():
            page.get_by_role("button", name="Search").click()
        page.get_by_role("link", name="auth_service").click()
        page.wait_for_url("**/console/graph/default/auth_service/")

    facts = page.locator("#facts-table tbody")
    with step("see the current fact, its history on both axes, the episode and the graph"):
        assert page.locator("#entity-title").inner_text().startswith("Authentication service")
        assert "Showing the entity now" in page.locator("#as-of-state").inner_text()
        assert "PASETO_v4_public" in facts.inner_text()
        assert "JWT_HS256" not in facts.inner_text()
        superseded = page.locator('#history-table tr[data-status="superseded"]')
        assert superseded.count() == 1
        assert "JWT_HS256" in superseded.inner_text()
        assert "Move tokens to PASETO v4" in page.locator("#episodes-table").inner_text()
        graph = page.locator("#neighbourhood-graph")
        assert graph.locator('a[data-entity="key_vault"]').count() == 1
        assert graph.locator('a[data-entity="hsm_cluster"]').count() == 1
        screenshot(page, "memory-browser-now", readme=True)

    with step("move the as-of date to February 2026"):
        page.get_by_label("Valid at (UTC)").fill("2026-02-01T12:00:00")
        page.get_by_role("button", name="Show").click()
        page.wait_for_url("**as_of=2026-02-01T12*")

    with step("see the superseded fact as it held then, and no later episode"):
        assert "Showing the entity as of" in page.locator("#as-of-state").inner_text()
        assert "JWT_HS256" in facts.inner_text()
        assert "PASETO_v4_public" not in facts.inner_text()
        assert page.locator('#history-table tr.mb-in-view[data-status="superseded"]').count() == 1
        assert "Move tokens to PASETO v4" not in page.locator("#episodes").inner_text()
        screenshot(page, "memory-browser-as-of")

    with step("ask what was known before PASETO was recorded, about a date after it"):
        page.get_by_label("Valid at (UTC)").fill("2026-06-01T00:00:00")
        page.get_by_label("As known at (UTC)").fill("2026-01-15T00:00:00")
        page.get_by_role("button", name="Show").click()
        page.wait_for_url("**known_at=2026-01-15*")
        # Nothing had been recorded by January 15 (the facts were recorded today).
        assert page.locator("#facts-empty").is_visible()

    with step("follow the graph to a neighbour, keyboard only"):
        with page.expect_navigation():
            page.get_by_role("link", name="Back to now").click()
        node = page.locator('#neighbourhood-graph a[data-entity="key_vault"]')
        node.focus()
        page.keyboard.press("Enter")
        page.wait_for_url("**/console/graph/default/key_vault/")
        assert "hsm_cluster" in page.locator("#facts-table").inner_text()
