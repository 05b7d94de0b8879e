"""Cross-app orchestration, the top of the house: export and import of a whole project,
backup, the demo, and the MCP prompt that joins a saved session with compiled memory. It may
import every app; no app imports it."""
