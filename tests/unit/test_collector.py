"""The collector pause around bulk reads (verification, audits, snapshot loads)."""

import gc

import pytest

from memoryproject.collector import collector_paused


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
