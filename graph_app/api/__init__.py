"""REST adapters of the knowledge graph (thin: services and selectors do the work)."""
