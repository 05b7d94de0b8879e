"""The memory browser: staff pages that show an entity of the knowledge graph as it is, or as
it was at a chosen valid time and transaction time."""
