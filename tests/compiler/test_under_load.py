"""``--under-load N``: the benchmark commands measure beside N processes each spinning one core,
say so in their table and their JSON, and leave none of those processes behind."""

from __future__ import annotations

import io
import json
import os
import time
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from benchmarks.under_load import SPIN, spinning

TICKS = os.sysconf("SC_CLK_TCK")


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def _spinners_of_this_process() -> list[int]:
    """The spinning processes this test process started that still exist (zombies included:
    a process not reaped is left behind too)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if int(stat[1]) == os.getpid() and SPIN.encode() in command:
            found.append(int(entry.name))
    return found


def _run(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def test_each_spinning_process_keeps_a_core_busy_and_is_gone_after_the_block():
    with spinning(2) as pids:
        assert len(pids) == 2
        time.sleep(1.0)
        used = [_cpu_seconds(pid) for pid in pids]
    # Each ran its loop, not a sleep: at least a quarter of the second on a core, however
    # busy the machine (two cores, two spinners, this test and whatever else runs).
    assert all(seconds >= 0.25 for seconds in used), used
    assert _spinners_of_this_process() == []


def test_the_spinning_processes_are_gone_when_the_measurement_fails():
    with pytest.raises(RuntimeError), spinning(1):
        raise RuntimeError("the measurement failed")
    assert _spinners_of_this_process() == []


@pytest.mark.django_db
def test_memory_benchmark_under_load_says_so_in_its_json_and_its_table():
    report = json.loads(_run("memory_benchmark", "--scale", "small", "--under-load", "1", "--json"))
    assert report["under_load"] == {"spinning_processes": 1, "cpus": os.cpu_count()}
    assert report["budget_compliance_rate"] == 1.0  # measured as without the load
    assert _spinners_of_this_process() == []
    text = _run("memory_benchmark", "--scale", "small", "--under-load", "1")
    assert "under load: 1 more process(es) each spinning one core" in text


@pytest.mark.django_db
def test_a_quiet_run_says_it_added_no_load():
    report = json.loads(_run("memory_benchmark", "--scale", "small", "--json"))
    assert report["under_load"]["spinning_processes"] == 0


@pytest.mark.parametrize("value", ["-1", "65"])
def test_a_load_out_of_range_is_refused_naming_the_option(value):
    with pytest.raises(CommandError, match=r"--under-load: must be an integer from 0 to 64"):
        _run("memory_benchmark", "--scale", "small", "--under-load", value)
    with pytest.raises(CommandError, match=r"--under-load: must be an integer from 0 to 64"):
        _run("plan_benchmark", "--under-load", value)
