"""Accessible basics of the console pages: every control has a name a screen reader reads
(a label or an aria-label), every control is reachable by keyboard (no negative tabindex),
and the colours the console adds keep a WCAG AAA contrast (7:1)."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from audit_app.injection_log import injection_log_append
from memoryproject.models import Project
from memoryproject.timeutil import utcnow

pytestmark = pytest.mark.django_db

CSS = Path(__file__).resolve().parents[2] / "audit_app/static/audit_app/console.css"


class Controls(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.controls: list[dict[str, str | None]] = []
        self.labels: set[str] = set()
        self.negative_tabindex: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "label" and found.get("for"):
            self.labels.add(str(found["for"]))
        if tag in ("input", "select", "textarea") and found.get("type") != "hidden":
            self.controls.append(found)
        interactive = tag in ("a", "button", "input", "select", "textarea", "summary")
        if interactive and (found.get("tabindex") or "0").startswith("-"):
            self.negative_tabindex.append(found)


@pytest.fixture
def staff(client):
    user = get_user_model().objects.create_superuser("auditor", "", "pw-for-tests-only")
    client.force_login(user)
    return client


def test_every_control_of_the_log_pages_has_a_name_and_a_tab_stop(staff):
    demo = Project.objects.get_or_create(slug="demo")[0]
    record = injection_log_append(
        project=demo,
        channel="rest",
        client="agent",
        status="injected",
        decision="PASS",
        trust_score=0.9,
        threshold=0.5,
        mode="auto",
        trace_ids=[],
        system_prompt="text",
        generated_at=utcnow(),
        source="compile",
    )
    base = "/admin/audit_app/injectionrecord/"
    for url in (base, f"{base}{record.pk}/change/", f"{base}export/"):
        parser = Controls()
        parser.feed(staff.get(url).content.decode())
        unnamed = [
            c
            for c in parser.controls
            if not c.get("aria-label")
            and str(c.get("id")) not in parser.labels
            # A button is named by its text.
            and not (c.get("type") in ("submit", "button", "reset") and c.get("value"))
        ]
        assert unnamed == [], url
        assert parser.negative_tabindex == [], url


def _luminance(hex_colour: str) -> float:
    channels = [int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def _contrast(a: str, b: str) -> float:
    light, dark = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def test_the_console_colours_keep_aaa_contrast():
    css = CSS.read_text(encoding="utf-8")
    pairs = re.findall(r"background: (#[0-9a-f]{6}); color: (#[0-9a-f]{6})", css)
    pairs += [
        (b, c) for c, b in re.findall(r"color: (#[0-9a-f]{6}); background: (#[0-9a-f]{6})", css)
    ]
    assert len(pairs) >= 3
    for background, colour in pairs:
        assert _contrast(background, colour) >= 7, (background, colour)
