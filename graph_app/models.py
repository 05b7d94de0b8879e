"""Models (filled in by the feature issues)."""
