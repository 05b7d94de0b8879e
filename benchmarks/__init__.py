"""Benchmarks, evaluations and load tests of the product, outside the serving apps: memory/
(graph and compiler latency on a synthetic memory), retrieval/ (recall on a generated
engineering memory), locomo/ (evidence recall on LoCoMo), screening/ (screening on its corpus),
plan/ (/v1/plan latency and the side-by-side run), loadtest/ (load and crash test over HTTP).
They sit above the apps: the serving code never imports them; the management commands are
their entry points. stats.py holds the one percentile they all report."""
