"""Where a delivered compile's time goes: ranking, activation, packing, SQL reads and the
receipt write, timed inside ``context_deliver`` (the compile a REST or MCP caller gets, its
receipt committed to the injection log) over the benchmark's queries.

The stages are timed by wrapping, for the length of the measure only, the functions that do
them: ``MemoryIndex.rank`` (ranking, activation taken out of it), ``MemoryIndex._activate``
(spreading activation), the compiler's ``_pack`` (candidate lines, previews, packing under the
budget), every SQL statement the compile runs (graph head, open findings, releases) and
everything the delivery does after the compile (the write transaction: the quarantine holds,
the receipt's insert, the commit). "other" is the rest: the request's and the answer's
contracts, the payload maps, the lock. Each stage's figure is its mean time per compile and
its share of the mean delivery (the stages add up to it); the delivery's median is given too.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any
from unittest import mock

from django.db import connection

import graph_app.compiler as compiler_module
import graph_app.delivery as delivery_module
from graph_app.delivery import context_deliver
from graph_app.domain.memory_index import MemoryIndex
from memoryproject.contracts import Caller
from memoryproject.models import Project

STAGES = ("ranking", "activation", "packing", "sql_reads", "receipt_write", "other")


class _Clock:
    """Time per stage within one compile, and the statements the receipt write ran."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = dict.fromkeys(STAGES, 0.0)
        self.in_receipt = False
        self.receipt_inserts = 0

    def timing(self, stage: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.spent[stage] += time.perf_counter() - start

        return timed

    def statement(self, execute: Callable[..., Any], sql: str, *args: Any) -> Any:
        if self.in_receipt:
            self.receipt_inserts += sql.lstrip().upper().startswith("INSERT")
            return execute(sql, *args)
        start = time.perf_counter()
        try:
            return execute(sql, *args)
        finally:
            self.spent["sql_reads"] += time.perf_counter() - start


@contextmanager
def _clocked(clock: _Clock) -> Iterator[None]:
    compile_real = delivery_module.context_compile

    def compiled(**kwargs: Any) -> Any:
        result = compile_real(**kwargs)
        clock.in_receipt = True  # what the delivery does from here on is the receipt write
        clock.spent["receipt_write"] -= time.perf_counter()
        return result

    with ExitStack() as stack:
        stack.enter_context(
            mock.patch.object(MemoryIndex, "rank", clock.timing("ranking", MemoryIndex.rank))
        )
        stack.enter_context(
            mock.patch.object(
                MemoryIndex, "_activate", clock.timing("activation", MemoryIndex._activate)
            )
        )
        stack.enter_context(
            mock.patch.object(
                compiler_module, "_pack", clock.timing("packing", compiler_module._pack)
            )
        )
        stack.enter_context(mock.patch.object(delivery_module, "context_compile", compiled))
        stack.enter_context(connection.execute_wrapper(clock.statement))
        yield


def stage_profile(project: Project, queries: list[str], budget: int) -> dict[str, Any]:
    """The mean time per stage (ms) of delivering each of ``queries`` once, its share of the
    mean delivery, and the receipt write's inserts per delivery."""
    per_stage: dict[str, list[float]] = {stage: [] for stage in STAGES}
    totals: list[float] = []
    inserts: list[int] = []
    caller = Caller.parse({"channel": "rest", "client": "memory_benchmark"})
    for query in queries:
        clock = _Clock()
        with _clocked(clock):
            start = time.perf_counter()
            context_deliver(project=project, query=query, max_tokens=budget, caller=caller)
            total = time.perf_counter() - start
        clock.spent["receipt_write"] += start + total  # from the compile's end to here
        clock.spent["ranking"] -= clock.spent["activation"]
        clock.spent["other"] = total - sum(v for k, v in clock.spent.items() if k != "other")
        for stage in STAGES:
            per_stage[stage].append(clock.spent[stage] * 1000)
        totals.append(total * 1000)
        inserts.append(clock.receipt_inserts)
    total_mean = statistics.fmean(totals)
    return {
        "compiles": len(totals),
        "total_mean_ms": round(total_mean, 3),
        "total_p50_ms": round(statistics.median(totals), 3),
        "stages": {
            stage: {
                "mean_ms": round(statistics.fmean(values), 3),
                "share": round(statistics.fmean(values) / total_mean, 3),
            }
            for stage, values in per_stage.items()
        },
        "receipt_inserts_per_delivery": max(inserts, default=0),
    }


def stage_lines(profile: dict[str, Any]) -> list[str]:
    """The stage profile as text."""
    lines = [
        f"delivered compile, per stage (mean of {profile['compiles']} compiles: "
        f"{profile['total_mean_ms']:.3f} ms, p50 {profile['total_p50_ms']:.3f} ms):"
    ]
    for stage, figures in profile["stages"].items():
        lines.append(f"  {stage:<14} {figures['mean_ms']:8.3f} ms  {100 * figures['share']:5.1f} %")
    lines.append(f"  receipt inserts per delivery: {profile['receipt_inserts_per_delivery']}")
    return lines
