"""The knowledge graph and the context compiler over MCP: memory_* tools, graph resources and
prompts, one module per part, each registering its own."""

from memoryproject.mcp_calls import McpRegistry

from . import compile, graph


def register(server: McpRegistry) -> None:
    graph.register(server)
    compile.register(server)
