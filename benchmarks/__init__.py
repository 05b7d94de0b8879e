"""Tools about the product: benchmarks and evaluations, never imported by the serving apps."""
