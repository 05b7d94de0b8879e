"""The screening evaluation: a corpus of injection probes, benign text and secrets (data/), split
into a tune part and a held-out part, and the run that measures screening on it."""
