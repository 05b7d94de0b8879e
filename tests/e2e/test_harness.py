"""The browser tests' own harness: a failing step says which step, where, and keeps a
screenshot of the page as it was."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import SCREENSHOTS

pytestmark = pytest.mark.slow


def test_a_failing_step_names_itself_the_page_and_its_screenshot(page, step):
    shot = SCREENSHOTS / "FAILED-check-something-impossible.png"
    shot.unlink(missing_ok=True)
    page.goto("/healthz")
    with pytest.raises(AssertionError) as failure, step("check something impossible"):
        assert page.locator("h1#nowhere").count() == 1, "no such heading"
    message = str(failure.value)
    assert message.startswith("step 'check something impossible' failed at http://")
    assert (
        "/healthz (screenshot: FAILED-check-something-impossible.png): no such heading" in message
    )
    assert shot.exists()
    shot.unlink()
