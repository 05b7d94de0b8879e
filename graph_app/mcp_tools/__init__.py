"""The knowledge graph and the context compiler over MCP: memory_* tools, graph resources and
prompts, one module per part, each registering its own."""

from memoryproject.mcp import MemoryServer

from . import compile, graph


def register(server: MemoryServer) -> None:
    graph.register(server)
    compile.register(server)
