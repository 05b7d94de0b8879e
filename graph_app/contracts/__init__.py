"""Inputs and outputs of the knowledge graph (``graph``) and of the context compiler
(``compile``): one definition per operation, read by services, REST, MCP and OpenAPI."""
