"""The collector pause around bulk reads (verification, audits, snapshot loads), and the heap
given back after bulk work."""

import gc
import os
import platform
import subprocess
import sys
from pathlib import Path

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


TRIMMED = """
from pathlib import Path
from memoryproject.collector import heap_trim
def rss():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
large, kept = [], []
for _ in range(2048):  # 64 MiB from the C heap, each block followed by a small one kept
    large.append(bytearray(32 * 1024))
    kept.append(bytearray(64))
del large
before = rss()
heap_trim()
print(before, rss())
"""


@pytest.mark.skipif(
    platform.libc_ver()[0] != "glibc" or not Path("/proc/self/status").exists(),
    reason="malloc_trim is glibc's; RSS read from Linux's /proc",
)
def test_heap_trim_gives_freed_heap_pages_back_to_the_system():
    # In a process of its own, whose heap nothing else shapes: 64 MiB of blocks glibc serves
    # from its heap (below its mmap threshold), among blocks still held, are freed: free()
    # keeps them mapped, resident, until the heap is trimmed.
    answer = subprocess.run(
        [sys.executable, "-c", TRIMMED],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
        env={**os.environ, "PYTHONHASHSEED": "0"},
    )
    before, after = map(float, answer.stdout.split())
    assert before - after > 32, (before, after)  # most of the 64 MiB are no longer resident
