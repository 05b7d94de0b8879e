"""Retrieval quality of the context compiler on a generated engineering memory: the seeded
corpus with its questions and gold citations, and the run that scores the compiler on it."""
