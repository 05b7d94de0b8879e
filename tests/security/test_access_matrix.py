"""The access matrix: every REST operation and every MCP tool, tried by every kind of caller.

The operations are read off the OpenAPI schema and the tools off ``tools/list``, so a new
endpoint or tool is walked without editing this file (one whose path parameter has no sample
fails, naming it). Each is called with no key, a revoked key, a read key, another project's key
and the right key, all aimed at project ``alpha`` and its items:

- no key, revoked key: 401 (MCP: before any MCP message);
- read key: 403 when the operation needs more than read, else as the right key;
- another project's key: 403 or 404, or a success that shows nothing of ``alpha``;
- right key: a success, or a 400 (or 409 on its own item's state) naming a field; never 401,
  403, 404 or 5xx.

Every refused call leaves every table as it was.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import anyio
import pytest
from django.apps import apps
from django.db import connection
from django.test import override_settings
from django.urls import resolve
from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient

from memoryproject.models import Project, ProjectAPIKey
from memoryproject.services import api_key_create

APPS = ("memoryproject", "sessions_app", "graph_app", "audit_app")
ALPHA, BETA = "alpha", "beta"
SUMMARY = (
    "Active project: alpha. Last decision: keep the access matrix exhaustive. Current output: "
    "tests/security/test_access_matrix.py. Open questions: none. Key files: memoryproject/auth.py"
)
#: Values for fields and path parameters by name; other required fields get "x".
SAMPLES: dict[str, Any] = {
    "summary": SUMMARY,
    "title": "Matrix episode",
    "category": "adr",
    "content": "The access matrix walks every operation.",
    "subject_id": "matrix_svc",
    "predicate": "matrix_tier",
    "object_value": "gold",
    "query": "matrix_svc tier",
    "as_of": "2026-01-01T00:00:00Z",
}
IDENTITIES = ("none", "revoked", "read", "other", "right")
SCOPE_RANK = {"read": 0, "write": 1, "admin": 2}


def table_counts() -> dict[str, int]:
    """Rows per model of the product's apps: what a refused call must leave as it was."""
    counts = {}
    for label in APPS:
        for model in apps.get_app_config(label).get_models():
            counts[model._meta.label] = model._default_manager.count()
    return counts


def _key(projects: tuple[str, ...], scope: str, name: str) -> str:
    return api_key_create(name=name, project_slugs=list(projects), scope=scope)[1]


def _seed() -> dict[str, Any]:
    """Project alpha with one of every item (written through REST with its own key) and
    project beta; answers the sample ids and a key factory."""
    for slug in (ALPHA, BETA):
        Project.objects.get_or_create(slug=slug, defaults={"name": slug})
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {_key((ALPHA,), 'write', 'seed')}")

    def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
        response = client.post(path, {"project": ALPHA, **body}, format="json")
        assert response.status_code in (200, 201), (path, response.content)
        return dict(response.json())

    fact = post(
        "/v1/graph/facts",
        {"subject_id": "matrix_svc", "predicate": "runs_on", "object_value": "k8s"},
    )
    episode = post(
        "/v1/graph/episodes",
        {
            "title": "Seed",
            "category": "adr",
            "content": "seed",
            "entities_mentioned": ["matrix_svc"],
        },
    )
    trace = post("/v1/traces", {"model": "m", "active_project": "alpha"})
    compiled = post("/v1/graph/compile", {"query": "matrix_svc"})
    return {
        "fact_id": fact["fact"]["id"],
        "episode_id": episode["id"],
        "entity_id": "matrix_svc",
        "trace_id": trace["trace_id"],
        "record_id": compiled["injection_id"],
    }


def rest_operations() -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(method, path template, operation schema) of every operation the OpenAPI documents."""
    schema = SchemaGenerator().get_schema(request=None, public=True)
    for path, entry in schema["paths"].items():
        for method, operation in entry.items():
            if method in {"get", "post", "put", "patch", "delete"}:
                yield method, path, {**operation, "components": schema["components"]}


def _required_scope(method: str, path: str) -> str:
    view = resolve(path).func.view_class  # type: ignore[attr-defined]
    declared = getattr(view, "required_scope", None)
    return str(declared or ("read" if method == "get" else "write"))


def _body(operation: dict[str, Any]) -> dict[str, Any]:
    ref = (
        operation.get("requestBody", {})
        .get("content", {})
        .get("application/json", {})
        .get("schema", {})
        .get("$ref", "")
    )
    if not ref:
        return {}
    component = operation["components"]["schemas"][ref.rsplit("/", 1)[-1]]
    return {name: SAMPLES.get(name, "x") for name in component.get("required", [])}


def _fill(path: str, ids: dict[str, Any]) -> str:
    def value(match: re.Match[str]) -> str:
        name = match[1]
        assert name in ids, f"{path}: add a sample of alpha's '{name}' to the access matrix"
        return str(ids[name])

    return re.sub(r"{(\w+)}", value, path)


class Callers:
    """One REST client per identity; keys made for the scope an operation needs."""

    def __init__(self) -> None:
        self.keys: dict[tuple[str, str], str] = {}

    def key(self, identity: str, scope: str) -> str | None:
        if identity == "none":
            return None
        project, scope = {
            "revoked": (ALPHA, "admin"),
            "read": (ALPHA, "read"),
            "other": (BETA, scope),
            "right": (ALPHA, scope),
        }[identity]
        if (identity, scope) not in self.keys:
            key = _key((project,), scope, f"matrix {identity}")
            if identity == "revoked":
                ProjectAPIKey.objects.filter(prefix=key.partition(".")[0]).update(revoked=True)
            self.keys[(identity, scope)] = key
        return self.keys[(identity, scope)]

    def client(self, identity: str, scope: str) -> APIClient:
        client = APIClient()
        key = self.key(identity, scope)
        if key is not None:
            client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
        return client


def _shows_alpha(body: bytes, ids: dict[str, Any]) -> bool:
    """Whether an answer names project alpha or one of its items (the entity's name and the
    receipt's small integer id are not distinctive, so they are looked for as ids only)."""
    text = body.decode("utf-8", "replace")
    distinct = [ids["fact_id"], ids["episode_id"], ids["trace_id"]]
    return (
        f'"{ALPHA}"' in text
        or any(str(value) in text for value in distinct)
        or re.search(rf'"id":\s*{ids["record_id"]}\b', text) is not None
    )


def _check(identity: str, scope: str, status: int, body: bytes, ids: dict[str, Any]) -> None:
    if identity in ("none", "revoked"):
        assert status == 401
    elif identity == "read" and scope != "read":
        assert status == 403
    elif identity == "other":
        assert status in (403, 404) or (status < 300 and not _shows_alpha(body, ids))
    else:
        # A 409 is the project's own state (a fact already retracted by the call before).
        assert status < 300 or status in (400, 409), body[:300]
    if status >= 400:
        assert json.loads(body)["message"], "every refusal is the JSON error shape"


def _variants(
    method: str, path: str, template: str, operation: dict[str, Any]
) -> list[tuple[str, Any]]:
    """(url, body) of each way to aim a call at alpha: naming it, and (for an item in the
    path) leaving the item to choose its project."""
    by_item = "{" in template
    if method == "get":
        aimed = [(f"{path}?{urlencode({'project': ALPHA})}", None)]
        return aimed + ([(path, None)] if by_item else [])
    body = _body(operation)
    return [(path, {"project": ALPHA, **body})] + ([(path, body)] if by_item else [])


@pytest.mark.django_db
@override_settings(MEMORY_AUTH_FAILURES=100_000)
def test_every_rest_operation_applies_the_access_rules():
    ids = _seed()
    callers = Callers()
    walked = []
    for method, template, operation in rest_operations():
        path = _fill(template, ids)
        scope = _required_scope(method, path)
        for url, body in _variants(method, path, template, operation):
            for identity in IDENTITIES:
                client = callers.client(identity, scope)
                before = table_counts()
                if method == "get":
                    response = client.get(url)
                else:
                    response = getattr(client, method)(url, body, format="json")
                label = f"{identity} {method.upper()} {url} {body}"
                try:
                    _check(identity, scope, response.status_code, response.content, ids)
                except AssertionError as exc:
                    raise AssertionError(f"{label}: {response.status_code} {exc}") from exc
                if response.status_code >= 400:
                    assert table_counts() == before, f"{label}: a refused call wrote"
        walked.append(f"{method.upper()} {template}")
    assert len(walked) >= 24, walked


@pytest.mark.django_db
def test_writes_refuse_a_project_in_the_query_string():
    ids = _seed()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {_key((ALPHA, BETA), 'write', 'both')}")
    before = table_counts()
    for path, body in (
        ("/v1/graph/facts", {"subject_id": "a", "predicate": "b", "object_value": "c"}),
        ("/v1/traces", {"model": "m"}),
        (f"/v1/graph/facts/{ids['fact_id']}/retract", {}),
        ("/v1/sessions/save", {"summary": SUMMARY}),
    ):
        response = client.post(f"{path}?project={BETA}", body, format="json")
        assert response.status_code == 400, (path, response.content)
        assert "project" in response.json()["fields"]
        assert "query string" in response.json()["message"]
    assert table_counts() == before
    # A read-only POST (plan, compile) still reads its project from the query string.
    compiled = client.post(f"/v1/graph/compile?project={BETA}", {"query": "x"}, format="json")
    assert compiled.status_code == 200 and compiled.json()["project"] == BETA


@pytest.mark.django_db
def test_another_projects_trace_id_is_not_revealed():
    """Recording a trace with an id another project holds answers as for a new id."""
    ids = _seed()
    beta = APIClient()
    beta.credentials(HTTP_AUTHORIZATION=f"Bearer {_key((BETA,), 'write', 'beta')}")
    taken = beta.post("/v1/traces", {"trace_id": ids["trace_id"], "model": "m"}, format="json")
    fresh = beta.post(
        "/v1/traces",
        {"trace_id": "6f9619ff-8b86-4011-b42d-00c04fc964ff", "model": "m"},
        format="json",
    )
    assert taken.status_code == fresh.status_code == 201
    assert taken.json()["trace_id"] == ids["trace_id"] and taken.json()["project"] == BETA
    # Each project reads its own trace under that id; alpha's is untouched.
    alpha = APIClient()
    alpha.credentials(HTTP_AUTHORIZATION=f"Bearer {_key((ALPHA,), 'read', 'alpha')}")
    assert alpha.get(f"/v1/traces/{ids['trace_id']}").json()["project"] == ALPHA
    assert beta.get(f"/v1/traces/{ids['trace_id']}").json()["project"] == BETA
    # Within its own project the id is taken: 409, as before.
    again = beta.post("/v1/traces", {"trace_id": ids["trace_id"], "model": "m"}, format="json")
    assert again.status_code == 409
    # A key that sees both projects must name one.
    both = APIClient()
    both.credentials(HTTP_AUTHORIZATION=f"Bearer {_key((ALPHA, BETA), 'read', 'both')}")
    ambiguous = both.get(f"/v1/traces/{ids['trace_id']}")
    assert ambiguous.status_code == 400 and "project" in ambiguous.json()["fields"]
    named = both.get(f"/v1/traces/{ids['trace_id']}?project={BETA}")
    assert named.status_code == 200 and named.json()["project"] == BETA


# --- MCP over streamable HTTP ---------------------------------------------------------------


def _tool_arguments(tool: Any, ids: dict[str, Any]) -> dict[str, Any]:
    values = {**SAMPLES, **ids}
    required = tool.input_schema.get("required", [])
    return {name: values.get(name, "x") for name in required}


PERMISSION_WORDS = ("scope", "may not", "no project", "not found", "no fact", "no episode")


def _mcp_check(
    identity: str, operation_access: str, result: Any, ids: dict[str, Any], aimed: bool
) -> None:
    """``aimed``: the call names project alpha (else it names only alpha's items, if any, and
    another project's key acts on its own project)."""
    from tests.mcp.conftest import text_of

    text = text_of(result)
    if identity == "read" and operation_access != "read":
        assert result.is_error and "scope" in text, text
    elif identity == "other" and aimed:
        assert result.is_error and any(word in text for word in PERMISSION_WORDS), text
    elif identity == "other":
        shown = json.dumps(result.structured_content).encode()
        assert result.is_error or not _shows_alpha(shown, ids), text
    else:
        assert not result.is_error or not any(
            word in text for word in ("scope", "may not", "no project")
        ), text


def _raw_call(port: int, key: str | None, name: str) -> int:
    import http.client

    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name}})
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("POST", "/mcp", body=body, headers=headers)
    status = conn.getresponse().status
    conn.close()
    return status


def _counts_in_thread() -> dict[str, int]:
    try:
        return table_counts()
    finally:
        connection.close()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_every_mcp_tool_applies_the_access_rules(tmp_path):
    from memoryproject.mcp import build_server
    from tests.mcp.conftest import start_http_server, stop_http_server

    ids = _seed()
    # The scope each tool needs: its access, or its own (admin for auditors' reads).
    access = {
        name: op.scope or op.access for name, op in build_server().registry.operations.items()
    }
    callers = Callers()
    keys = {identity: callers.key(identity, "admin") for identity in IDENTITIES}
    server = start_http_server(tmp_path, env={"MEMORY_AUTH_FAILURES": "100000"})
    try:
        tools = server.run(lambda s: s.list_tools(), key=keys["right"]).tools
        assert {t.name for t in tools} == set(access), "every tool is an operation"
        for tool in tools:
            for identity in ("none", "revoked"):
                assert _raw_call(server.port, keys[identity], tool.name) == 401, tool.name
        for identity in ("read", "other", "right"):

            async def scenario(session: Any, identity: str = identity) -> None:
                for tool in tools:
                    arguments = _tool_arguments(tool, ids)
                    for call in ({**arguments, "project": ALPHA}, arguments):
                        before = await anyio.to_thread.run_sync(_counts_in_thread)
                        result = await session.call_tool(tool.name, call)
                        label = f"{identity} {tool.name} {call}"
                        try:
                            aimed = "project" in call
                            _mcp_check(identity, access[tool.name], result, ids, aimed)
                        except AssertionError as exc:
                            raise AssertionError(f"{label}: {exc}") from exc
                        if result.is_error:
                            after = await anyio.to_thread.run_sync(_counts_in_thread)
                            assert after == before, f"{label}: a refused call wrote"

            server.run(scenario, key=keys[identity])
    finally:
        stop_http_server(server)
        connection.close()


@pytest.mark.django_db
def test_another_projects_ids_answer_exactly_as_ids_that_do_not_exist():
    """Every id-taking endpoint: alpha's id, asked by beta's key, answers as a made-up id of
    the same shape does (status and message, the id aside)."""
    ids = _seed()
    made_up = {
        "fact_id": "fact_0123456789abcdef",
        "episode_id": "ep_0123456789abcdef",
        "entity_id": "no_such_entity",
        "trace_id": "00000000-0000-4000-8000-000000000000",
        "record_id": 999_999,
    }
    beta = APIClient()
    beta.credentials(HTTP_AUTHORIZATION=f"Bearer {_key((BETA,), 'admin', 'beta')}")
    checked = 0
    for method, template, _ in rest_operations():
        names = re.findall(r"{(\w+)}", template)
        if not names:
            continue
        answers = []
        for values in (ids, made_up):
            path = _fill(template, values)
            response = getattr(beta, method)(path, {}, format="json")
            text = response.content.decode()
            for name in names:
                text = text.replace(str(values[name]), "<id>")
            answers.append((response.status_code, text))
        assert answers[0] == answers[1], (method, template, answers)
        assert answers[0][0] == 404, (method, template, answers)
        checked += 1
    assert checked >= 6
