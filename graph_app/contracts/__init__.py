"""Inputs and outputs of the knowledge graph (``facts``, ``episodes``, ``entities``,
``time_travel``, ``integrity``, ``summary``, ``pages``, over the bounds and field types of
``fields``) and of the context compiler (``compile``): one definition per operation, read by
the services, REST, MCP and OpenAPI."""
