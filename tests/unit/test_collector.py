"""The collector pause around bulk reads (verification, audits, snapshot loads)."""

import gc

import pytest

from memoryproject.collector import collector_paused, start_up_pause, start_up_settle


@pytest.fixture(autouse=True)
def _collector_on():
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_the_collector_is_off_inside_and_on_again_after():
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_an_error_inside_still_turns_the_collector_back_on():
    with pytest.raises(ValueError), collector_paused():
        raise ValueError("boom")
    assert gc.isenabled()


def test_a_nested_pause_leaves_it_off_until_the_outer_one_ends():
    with collector_paused():
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_pause_begun_with_the_collector_off_leaves_it_off():
    gc.disable()
    with collector_paused():
        pass
    assert not gc.isenabled()


def test_a_start_up_pause_lasts_until_settled_and_freezes_what_start_up_built(monkeypatch):
    frozen = []
    monkeypatch.setattr(gc, "freeze", lambda: frozen.append(True))
    start_up_pause()
    assert not gc.isenabled()
    with collector_paused():  # bulk work during start-up leaves it off
        pass
    assert not gc.isenabled()
    start_up_settle()
    assert gc.isenabled() and frozen == [True]
    start_up_settle()  # once only
    assert frozen == [True]


def test_settling_without_a_start_up_pause_changes_nothing(monkeypatch):
    monkeypatch.setattr(gc, "freeze", lambda: pytest.fail("froze without a start-up pause"))
    start_up_settle()
    assert gc.isenabled()
    gc.disable()  # a pause the start-up did not begin is not ended by it
    start_up_settle()
    assert not gc.isenabled()


def test_a_start_up_begun_with_the_collector_off_leaves_it_off(monkeypatch):
    monkeypatch.setattr(gc, "freeze", lambda: pytest.fail("froze without a start-up pause"))
    gc.disable()
    start_up_pause()
    start_up_settle()
    assert not gc.isenabled()
