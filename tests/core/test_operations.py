"""One definition per operation: every MCP tool and its REST twin are built from the same
Operation, so they share arguments, defaults, bounds, errors and answers."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from django.urls import URLPattern, URLResolver, get_resolver
from drf_spectacular.generators import SchemaGenerator

from memoryproject.mcp import build_server
from memoryproject.operations import Operation


def _rest_views() -> dict[str, tuple[str, Any]]:
    """Operation name -> (route, view class) of every REST view built from an Operation."""
    found: dict[str, tuple[str, Any]] = {}

    def walk(patterns: list[Any], prefix: str) -> None:
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns, prefix + str(pattern.pattern))
            elif isinstance(pattern, URLPattern):
                view = getattr(pattern.callback, "view_class", None)
                operation = getattr(view, "operation", None)
                if isinstance(operation, Operation):
                    found[operation.name] = (prefix + str(pattern.pattern), view)

    walk(get_resolver().url_patterns, "/")
    return found


@pytest.fixture(scope="module")
def server_and_tools():
    server = build_server()
    tools = anyio.run(server.list_tools)
    return server, {tool.name: tool for tool in tools}


def test_every_mcp_tool_is_an_operation_with_a_rest_twin(server_and_tools):
    server, tools = server_and_tools
    rest = _rest_views()
    assert set(tools) == set(server.registry.operations), "every tool is declared from an Operation"
    missing = sorted(name for name in tools if name not in rest)
    assert not missing, f"MCP tools without a REST twin: {missing}"
    for name, operation in server.registry.operations.items():
        assert rest[name][1].operation is operation, name


def test_tool_arguments_are_the_input_model_plus_project(server_and_tools):
    server, tools = server_and_tools
    for name, operation in server.registry.operations.items():
        schema = tools[name].input_schema
        expected = operation.input.model_json_schema()["properties"]
        properties = dict(schema["properties"])
        assert properties.pop("project", None) is not None, f"{name} takes project"
        for field, spec in expected.items():
            assert properties[field] == spec, (name, field)
        assert set(properties) == set(expected), name
        assert set(schema.get("required", [])) == set(
            operation.input.model_json_schema().get("required", [])
        ), name


def test_tool_output_schema_is_the_output_model(server_and_tools):
    server, tools = server_and_tools
    for name, operation in server.registry.operations.items():
        published = tools[name].output_schema
        assert published is not None, name
        assert set(published["properties"]) == set(
            operation.output.model_json_schema()["properties"]
        ), name


@pytest.mark.django_db
def test_openapi_describes_each_operation_with_its_models(server_and_tools):
    server, _ = server_and_tools
    schema = SchemaGenerator().get_schema(request=None, public=True)
    rest = _rest_views()
    for name, operation in server.registry.operations.items():
        route, view = rest[name]
        path = "/" + route.strip("/").replace("<str:", "{").replace("<path:", "{")
        path = path.replace(">", "}")
        entry = schema["paths"][path][view.method]
        if view.method == "post":
            body = entry["requestBody"]["content"]["application/json"]["schema"]
            component = body["$ref"].rsplit("/", 1)[-1]
            assert component in {operation.input.__name__, operation.input.__name__ + "Request"}
        else:
            params = {p["name"] for p in entry["parameters"]}
            assert set(operation.input.model_json_schema()["properties"]) <= params, name
        responses = entry["responses"]
        ok = responses.get("200") or responses["201"]
        ref = ok["content"]["application/json"]["schema"]["$ref"]
        assert ref.endswith(operation.output.__name__), name


def test_each_tool_needs_the_scope_its_rest_twin_needs(server_and_tools):
    """REST asks a POST for scope write unless its view declares "read" (or the operation's
    own scope, e.g. admin for auditors' reads); MCP checks the operation's access and scope.
    Both must say the same for every pair."""
    server, _ = server_and_tools
    rest = _rest_views()
    for name, operation in server.registry.operations.items():
        _, view = rest[name]
        rest_scope = view.required_scope or ("read" if view.method == "get" else "write")
        needed = operation.scope or operation.access
        assert rest_scope == needed, (name, rest_scope, needed)


def test_tools_take_what_the_rest_bodies_take(server_and_tools):
    """The arguments once missing from MCP: object_entity on facts, metadata on episodes."""
    _, tools = server_and_tools
    assert "object_entity" in tools["memory_upsert_fact"].input_schema["properties"]
    assert "object_value" not in tools["memory_upsert_fact"].input_schema.get("required", [])
    assert "metadata" in tools["memory_record_episode"].input_schema["properties"]
    for tool in tools.values():
        assert "project" in tool.input_schema["properties"], tool.name
