"""Benchmarks of the knowledge graph and the context compiler: the synthetic corpus, the runs,
the in-memory reference they are compared to, scale sweeps with cold starts, and their chart."""
