"""No input makes a 5xx: every refusal is a 4xx in the JSON error shape, the same on SQLite and
PostgreSQL, naming the field and the rule.

The operations are read off the OpenAPI schema the server publishes, so a new endpoint is walked
too (and must be given a valid body in BODIES). Each test sends one kind of hostile input to
every operation and parameter it fits, and lists every answer that broke the rule.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
from django.urls import include, path
from rest_framework.test import APIClient

from graph_app.fact_writes import fact_upsert
from memoryproject.models import Project
from sessions_app.trace_writes import trace_record

pytestmark = pytest.mark.django_db

# The calendar's edges: outside the range of datetimes once in UTC.
OUT_OF_RANGE = [
    "0001-01-01T00:00:00+01:00",
    "9999-12-31T23:30:00-01:00",
    "9999-12-31T12:00:00-17:55",
]
# Inside it, with the largest offsets Python allows.
ODD_BUT_VALID = [
    "2026-01-01T00:00:00-17:55",
    "0001-01-01T17:55:00-17:55",
    "9999-12-31T00:00:00+17:55",
]
HUGE = 99999999999999999999999

# A valid body of every POST operation (by OpenAPI path): each test spoils one field of it.
BODIES: dict[str, dict[str, Any]] = {
    "/v1/traces": {"model": "claude", "policy": "agent", "last_decision": "retry webhooks"},
    "/v1/plan": {"n": 5, "mode": "dry_run"},
    "/v1/sessions/save": {
        "summary": "Active project: billing\nLast decision: retry webhooks with backoff"
    },
    "/v1/graph/facts": {"subject_id": "auth_service", "predicate": "uses", "object_value": "JWT"},
    "/v1/graph/facts/{fact_id}/retract": {},
    "/v1/graph/episodes": {"category": "adr", "title": "Tokens", "content": "Move to PASETO"},
    "/v1/graph/entities": {"entity_id": "payment_ledger", "kind": "module"},
    "/v1/graph/compile": {"query": "auth tokens"},
    "/v1/graph/audit/contradictions": {},
}


def operations(schema: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for template, methods in schema["paths"].items():
        for method, operation in methods.items():
            yield method.upper(), template, operation


def _url(template: str, ids: dict[str, str]) -> str:
    for name, value in ids.items():
        template = template.replace("{" + name + "}", quote(value, safe=""))
    return template


def _body_schema(schema: dict[str, Any], operation: dict[str, Any]) -> dict[str, Any]:
    ref = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    return schema["components"]["schemas"][ref.rsplit("/", 1)[1]]


def _kinds(prop: dict[str, Any]) -> list[dict[str, Any]]:
    return [o for o in prop.get("anyOf", [prop]) if o.get("type") != "null"]


def body_fields(schema: dict[str, Any], operation: dict[str, Any], *, kind: str, fmt: str = ""):
    """The top-level body fields of a JSON ``kind`` (and ``format``)."""
    props = _body_schema(schema, operation).get("properties", {})
    for name, prop in props.items():
        for option in _kinds(prop):
            if option.get("type") == kind and option.get("format", "") == fmt:
                yield name
                break


def query_fields(operation: dict[str, Any], *, kind: str, fmt: str = ""):
    for param in operation.get("parameters", []):
        shape = param["schema"]
        if param["in"] == "query" and shape.get("type") == kind and shape.get("format", "") == fmt:
            yield param["name"]


def call(api: APIClient, method: str, url: str, body: Any = None, query: str = "") -> Any:
    if query:
        url = f"{url}?{query}"
    if method == "GET":
        return api.get(url)
    raw = body if isinstance(body, (str, bytes)) else json.dumps(body)
    return api.generic(method, url, raw, content_type="application/json")


def broke_the_rule(response: Any, field: str | None = None, status: int = 400) -> str | None:
    """Why ``response`` is not a JSON ``status`` naming ``field`` (None when it is)."""
    if "application/json" not in response.get("Content-Type", ""):
        return f"{response.status_code} {response.get('Content-Type')}"
    body = response.json()
    if response.status_code != status:
        return f"{response.status_code} {body}"
    if not {"code", "message"} <= set(body):
        return f"not the error shape: {body}"
    if field is not None and field not in body.get("fields", {}):
        return f"does not name {field}: {body}"
    return None


def test_every_post_operation_has_a_valid_body_here(schema):
    posts = {template for method, template, _ in operations(schema) if method == "POST"}
    assert posts == set(BODIES), "add the new operation's valid body to BODIES"


def test_the_valid_bodies_are_accepted(admin_api, schema, ids):
    for method, template, _ in operations(schema):
        if method == "POST":
            response = call(admin_api, method, _url(template, ids), BODIES[template])
            assert response.status_code in (200, 201), (template, response.json())


def test_calendar_edge_timestamps_are_refused_in_every_datetime_parameter(admin_api, schema, ids):
    failures, tried = [], 0
    for method, template, operation in operations(schema):
        url = _url(template, ids)
        for name in query_fields(operation, kind="string", fmt="date-time"):
            base = "as_of=2026-01-01T00:00:00Z&" if "time-travel" in template else ""
            base = "" if name == "as_of" else base
            for value in OUT_OF_RANGE:
                tried += 1
                response = call(admin_api, method, url, query=f"{base}{name}={quote(value)}")
                if problem := broke_the_rule(response, name):
                    failures.append(f"{method} {template} ?{name}={value}: {problem}")
        if method == "POST":
            for name in body_fields(schema, operation, kind="string", fmt="date-time"):
                for value in OUT_OF_RANGE:
                    tried += 1
                    response = call(admin_api, method, url, {**BODIES[template], name: value})
                    if problem := broke_the_rule(response, name):
                        failures.append(f"{method} {template} {name}={value}: {problem}")
    assert tried >= 11 * len(OUT_OF_RANGE)
    assert not failures, "\n".join(failures)


def test_extreme_but_valid_offsets_never_make_a_server_error(admin_api, schema, ids):
    failures = []
    for method, template, operation in operations(schema):
        url = _url(template, ids)
        names = list(query_fields(operation, kind="string", fmt="date-time"))
        if method == "POST":
            names += list(body_fields(schema, operation, kind="string", fmt="date-time"))
        for name in names:
            for value in ODD_BUT_VALID:
                if method == "GET":
                    extra = "as_of=2026-01-01T00:00:00Z&" if "time-travel" in template else ""
                    response = call(admin_api, method, url, query=f"{extra}{name}={quote(value)}")
                else:
                    response = call(admin_api, method, url, {**BODIES[template], name: value})
                if response.status_code >= 500 or "json" not in response["Content-Type"]:
                    failures.append(f"{method} {template} {name}={value}: {response.status_code}")
    assert not failures, "\n".join(failures)


def test_huge_integers_are_refused_naming_the_field(admin_api, schema, ids):
    trace_record(project=Project.objects.get(slug="default"), model="m", policy="p")
    failures = []
    for method, template, operation in operations(schema):
        url = _url(template, ids)
        extra = "as_of=2026-01-01T00:00:00Z&" if "time-travel" in template else ""
        for name in query_fields(operation, kind="integer"):
            for value in (HUGE, -HUGE):
                response = call(admin_api, method, url, query=f"{extra}{name}={value}")
                if problem := broke_the_rule(response, name):
                    failures.append(f"{method} {template} ?{name}={value}: {problem}")
        if method == "POST":
            for name in body_fields(schema, operation, kind="integer"):
                for value in (HUGE, -HUGE):
                    response = call(admin_api, method, url, {**BODIES[template], name: value})
                    if problem := broke_the_rule(response, name):
                        failures.append(f"{method} {template} {name}={value}: {problem}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("template", ["/v1/traces", "/v1/graph/entities"])
def test_a_huge_limit_on_a_list_is_a_400_naming_limit(admin_api, ids, template):
    response = admin_api.get(f"{template}?limit={HUGE}")
    assert broke_the_rule(response, "limit") is None
    assert "from 1 to 200" in response.json()["message"]


def test_deeply_nested_json_is_refused_on_every_post(admin_api, schema, ids):
    deep_text = '{"a":' * 5000 + "1" + "}" * 5000
    deep_list = "[" * 100_000 + "]" * 100_000
    failures = []
    for method, template, _ in operations(schema):
        if method != "POST":
            continue
        url = _url(template, ids)
        nested: Any = "leaf"
        for _ in range(940):
            nested = {"k": nested}
        for body in (deep_text, deep_list, {**BODIES[template], "metadata": nested}):
            response = call(admin_api, method, url, body)
            if problem := broke_the_rule(response):
                failures.append(f"{method} {template} {str(body)[:30]}: {problem}")
            elif "nested" not in response.json()["message"]:
                failures.append(f"{method} {template}: {response.json()['message']}")
    assert not failures, "\n".join(failures)


def test_nesting_up_to_the_limit_is_kept(admin_api):
    nested: Any = "leaf"
    for _ in range(20):
        nested = {"k": nested}
    body = {**BODIES["/v1/graph/episodes"], "metadata": nested}
    response = admin_api.post("/v1/graph/episodes", body, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["metadata"] == nested


@pytest.mark.parametrize("bad", ["a\x00b", "\ud800", "tail \udfff"], ids=["nul", "high", "low"])
def test_nul_and_lone_surrogates_in_any_string_are_refused_naming_the_field(
    admin_api, schema, ids, bad
):
    failures, tried = [], 0
    for method, template, operation in operations(schema):
        if method != "POST":
            continue
        url = _url(template, ids)
        for name in body_fields(schema, operation, kind="string"):
            tried += 1
            response = call(admin_api, method, url, {**BODIES[template], name: bad})
            # A trace keeps its structured fields in metadata, and names it for them.
            named = [name, "metadata"] if template == "/v1/traces" else [name]
            problems = [broke_the_rule(response, field) for field in named]
            if all(problems):
                failures.append(f"{method} {template} {name}: {problems[0]}")
        for name, value in (("metadata", {"note": bad}), ("metadata", {bad: 1})):
            if "metadata" in _body_schema(schema, operation).get("properties", {}):
                response = call(admin_api, method, url, {**BODIES[template], name: value})
                if problem := broke_the_rule(response, name):
                    failures.append(f"{method} {template} {name}={value!r}: {problem}")
    assert tried > 20
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("bad", ["a%00b", "%ED%A0%80", "%00"])
def test_nul_and_broken_unicode_in_ids_and_query_never_make_a_server_error(
    admin_api, schema, ids, bad
):
    failures = []
    for method, template, operation in operations(schema):
        names = [p["name"] for p in operation.get("parameters", []) if p["in"] == "path"]
        for name in names:
            url = template.replace("{" + name + "}", bad)
            response = call(admin_api, method, _url(url, ids), BODIES.get(template, {}))
            if response.status_code >= 500 or "json" not in response["Content-Type"]:
                failures.append(f"{method} {url}: {response.status_code}")
            elif "%00" in bad and response.status_code != 400:
                failures.append(f"{method} {url}: {response.status_code}, not 400")
        query = f"project={bad}" if method == "GET" else ""
        response = call(admin_api, method, _url(template, ids), BODIES.get(template), query)
        if response.status_code >= 500 or "json" not in response["Content-Type"]:
            failures.append(f"{method} {template}?{query}: {response.status_code}")
    assert not failures, "\n".join(failures)


def test_a_nul_in_a_query_parameter_is_a_400_naming_it(admin_api):
    response = admin_api.get("/v1/graph/facts?subject=auth%00service")
    assert broke_the_rule(response, "subject") is None


def test_a_body_over_the_size_limit_is_a_413_in_json(admin_api, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    body = json.dumps({**BODIES["/v1/graph/episodes"], "content": "x" * 20_000})
    response = admin_api.generic("POST", "/v1/graph/episodes", body, "application/json")
    assert broke_the_rule(response, "body", status=413) is None
    assert "10000 bytes" in response.json()["message"]


def test_a_body_over_the_size_limit_without_a_length_is_a_413_in_json(admin_api, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    body = json.dumps({**BODIES["/v1/graph/episodes"], "content": "x" * 20_000}).encode()
    response = admin_api.generic(
        "POST", "/v1/graph/episodes", body, "application/json", CONTENT_LENGTH=""
    )
    assert response.status_code in (400, 413)
    assert response["Content-Type"] == "application/json"


@pytest.mark.parametrize("url", ["/v1/nope", "/v1/graph/nothing/here", "/v1/traces/a/b"])
def test_unknown_api_paths_answer_a_json_404(admin_api, url):
    assert broke_the_rule(admin_api.get(url), status=404) is None


def test_unknown_paths_without_a_key_also_answer_json():
    response = APIClient().get("/v1/nope")
    assert response.status_code in (401, 404)
    assert response["Content-Type"] == "application/json"


@pytest.mark.parametrize(
    ("method", "url"),
    [("DELETE", "/v1/traces"), ("PUT", "/v1/graph/facts"), ("PATCH", "/v1/plan")],
)
def test_a_wrong_method_answers_a_json_405_with_allow(admin_api, method, url):
    response = admin_api.generic(method, url, "{}", "application/json")
    assert broke_the_rule(response, status=405) is None
    assert "Allow" in response


@pytest.mark.parametrize(
    "value", ["null", "abc", "-1", "--1", "1.5", "1e3", " ", "0x10", str(HUGE)]
)
def test_offset_must_be_a_whole_number(admin_api, schema, value):
    lists = [t for m, t, o in operations(schema) if m == "GET" and "offset" in str(o)]
    assert len(lists) >= 5
    for template in lists:
        extra = "as_of=2026-01-01T00:00:00Z&" if "time-travel" in template else ""
        url = template.replace("{entity_id}", "auth_service").replace("{fact_id}", "x")
        response = admin_api.get(f"{url}?{extra}offset={quote(value)}")
        assert broke_the_rule(response, "offset") is None, (template, value)


@pytest.mark.parametrize(
    ("method", "url"),
    [
        ("GET", "/v1/traces?decison=PASS"),
        ("GET", "/v1/graph/facts?subjet=auth_service"),
        ("POST", "/v1/graph/compile?query=auth"),
        ("GET", "/v1/graph/time-travel?as_of=2026-01-01T00:00:00Z&page=2"),
    ],
)
def test_an_unknown_query_parameter_is_refused_not_ignored(admin_api, method, url):
    body = BODIES.get(url.split("?")[0], {})
    response = call(admin_api, method, url.split("?")[0], body, url.split("?")[1])
    name = url.split("?")[1].split("=")[0].split("&")[-1]
    name = url.rsplit("&", 1)[-1].split("=")[0] if "&" in url else name
    assert broke_the_rule(response, name) is None
    assert "unknown query parameter" in response.json()["message"]


def test_every_list_caps_its_page_and_links_the_next(admin_api, default_project):
    for n in range(5):
        trace_record(project=default_project, model=f"m{n}", policy="agent")
    first = admin_api.get("/v1/traces?limit=2").json()
    assert (first["count"], len(first["results"])) == (5, 2)
    assert "offset=2" in first["next"]
    assert broke_the_rule(admin_api.get("/v1/traces?limit=201"), "limit") is None
    assert len(admin_api.get("/v1/traces?limit=200").json()["results"]) == 5
    assert broke_the_rule(admin_api.get("/v1/traces?limit=0"), "limit") is None
    # Two signs were read as a number's and int() raised: a 500.
    assert broke_the_rule(admin_api.get("/v1/traces?limit=--1"), "limit") is None


def test_time_travel_is_paginated_with_the_snapshot_of_every_fact(admin_api, default_project):
    for n in range(5):
        fact_upsert(
            project=default_project, subject_id=f"svc_{n}", predicate="uses", object_value="x"
        )
    url = "/v1/graph/time-travel?as_of=2100-01-01T00:00:00Z"
    whole = admin_api.get(url).json()
    first = admin_api.get(url + "&limit=2").json()
    last = admin_api.get(url + "&limit=2&offset=4").json()
    assert whole["count"] == first["count"] == 5
    assert whole["snapshot_hash"] == first["snapshot_hash"]
    assert [f["id"] for f in first["facts"]] == [f["id"] for f in whole["facts"][:2]]
    assert (first["next_offset"], last["next_offset"], whole["next_offset"]) == (2, None, None)
    assert len(last["facts"]) == 1
    assert broke_the_rule(admin_api.get(url + "&limit=1001"), "limit") is None


def test_the_entity_query_pages_its_lists(admin_api, default_project):
    for n in range(4):
        fact_upsert(
            project=default_project,
            subject_id="billing",
            predicate=f"calls_{n}",
            object_value="x",
        )
    answer = admin_api.get("/v1/graph/entities/billing?limit=3").json()
    assert len(answer["facts"]) == 3 and answer["totals"]["facts"] == 4
    assert answer["next_offset"] == 3
    rest = admin_api.get("/v1/graph/entities/billing?limit=3&offset=3").json()
    assert len(rest["facts"]) == 1 and rest["next_offset"] is None
    assert broke_the_rule(admin_api.get("/v1/graph/entities/billing?limit=501"), "limit") is None


def _shape_admits_empty(shape: dict[str, Any]) -> bool:
    """Whether a published JSON Schema admits the empty string."""
    if "anyOf" in shape:
        return any(_shape_admits_empty(option) for option in shape["anyOf"])
    if shape.get("const") == "" or "" in shape.get("enum", []):
        return True
    if shape.get("type") != "string" or {"format", "enum", "const", "$ref"} & set(shape):
        return False
    return shape.get("minLength", 0) == 0 and re.search(shape.get("pattern", ""), "") is not None


def _admits_empty(param: dict[str, Any]) -> bool:
    """Whether the published parameter admits an empty value (``?name=``)."""
    return bool(param.get("allowEmptyValue")) or _shape_admits_empty(param["schema"])


def test_an_empty_known_at_is_answered_as_the_schema_documents(admin_api, schema):
    # Schemathesis found it (300 examples an operation; 25 did not reach it): the API reads the
    # empty known_at as "now" and answers 200, while the schema published a date-time that no
    # empty value fits (negative data accepted).
    response = admin_api.get("/v1/graph/time-travel?as_of=0051-01-20T01%3A48%3A26Z&known_at=")
    assert response.status_code == 200, response.json()
    assert response.json()["facts"] == []
    params = schema["paths"]["/v1/graph/time-travel"]["get"]["parameters"]
    known_at = next(p for p in params if p["name"] == "known_at")
    assert _admits_empty(known_at), known_at


def test_every_query_parameter_documents_an_empty_value_as_the_api_reads_it(admin_api, schema, ids):
    """``?name=`` is answered (an empty value read as "not given") exactly where the schema
    admits an empty value, and refused with a 400 naming the parameter everywhere else."""
    wrong = []
    for method, template, operation in operations(schema):
        if method != "GET":
            continue
        params = [p for p in operation.get("parameters", []) if p["in"] == "query"]
        required = "as_of=2026-01-01T00:00:00Z&" if "time-travel" in template else ""
        for param in params:
            if param.get("required"):
                continue
            name = param["name"]
            response = admin_api.get(f"{_url(template, ids)}?{required}{name}=")
            accepted = response.status_code != 400  # (a 404: no such item, all the same)
            if accepted != _admits_empty(param) or (
                not accepted and broke_the_rule(response, name) is not None
            ):
                wrong.append(f"{template} {name}=: {response.status_code}, documented {param}")
    assert not wrong


def test_an_empty_external_id_is_answered_as_the_schema_documents(admin_api, schema):
    # Schemathesis found it (500 examples an operation): the API reads the empty external_id
    # as none and records the episode, while the schema published a string of 1 to 200
    # characters or null (negative data accepted). The exact body it sent (the surrogates are
    # pairs, as JSON sends characters outside the BMP):
    body = {
        "external_id": "",
        "category": "incident",
        "content": "(\u0013\u00d78",
        "occurred_at": "0250-12-25T04:41:46Z",
        "files_touched": [
            "s]r\u00a0\u00a6\u3d8f\ud99f\udf8c\u00bb\u00c6\udb79\udd8b",
            "p\u00af\fn\u0012A\u0011V\u00c7\u00e3>\u00ab\u001e\u00cco\u008en\u00f4",
            "+0.0",
            "kr\u0013\u00c1\u0017n\u00c9;\udae9\ude28Q\u00f2",
        ],
        "title": "\u0083",
    }
    response = call(admin_api, "POST", "/v1/graph/episodes", body)
    assert response.status_code in (200, 201), response.json()
    assert response.json()["external_id"] is None
    shape = _body_schema(schema, schema["paths"]["/v1/graph/episodes"]["post"])
    assert _shape_admits_empty(shape["properties"]["external_id"])


def test_a_body_field_takes_an_empty_value_only_where_the_schema_admits_it(admin_api, schema, ids):
    """A body field set to "" is taken (read as "not given") only where the schema admits the
    empty string; elsewhere it is refused with a 400 naming the field. (The converse does not
    hold: the schema of text that must not be blank admits "" as a plain string.)"""
    wrong = []
    for method, template, operation in operations(schema):
        if method != "POST":
            continue
        for name, shape in _body_schema(schema, operation).get("properties", {}).items():
            body = {**BODIES[template], name: ""}
            response = call(admin_api, method, _url(template, ids), body)
            accepted = response.status_code < 400 or response.status_code in (404, 409)
            if (accepted and not _shape_admits_empty(shape)) or (
                not accepted and broke_the_rule(response, name) is not None
            ):
                wrong.append(f"{template} {name}='': {response.status_code}, documented {shape}")
    assert not wrong


@pytest.mark.parametrize("url", ["/v1/traces", "/v1/audit/injections"])
@pytest.mark.parametrize("name", ["created_after", "created_before"])
def test_a_percent_sign_in_a_timestamp_filter_is_a_400_naming_it(admin_api, url, name):
    # Schemathesis found it (500 examples an operation): the refusal quotes the value, and
    # django-filter formats the message with %, so a '%' in the value made a 500.
    for value in ("%Y", "%", "%(x)s", "100%25"):
        response = admin_api.get(f"{url}?{name}={quote(value)}")
        assert broke_the_rule(response, name) is None, value
        assert value in response.json()["message"]


@pytest.mark.parametrize("where", ["extra", "metadata"])
def test_a_trace_with_an_integer_beyond_json_s_safe_range_is_a_400(admin_api, where):
    # Schemathesis found it (500 examples an operation, seed 3): a key the model does not name
    # is kept in metadata and hashed as canonical JSON, which has no form for an integer
    # beyond 2**53: a 500. The exact body it sent, and the same value in metadata:
    body = {
        "supersedes": {
            "9\ud999\udfd7\u0084\u00e6+\\4\uda20\udef1\u00cfj\ud90a\udd19\u008f\u00bd\u00fa\u008a>": -6.103515625e-05,
            "\ud810\udff3\u00c3\u00d3\ud9cb\udf39\u0096\u00cb\u00f3\u00c2[6\u00c7": [
                43,
                "[",
                5699355149812781547520,
            ],
        },
        "model": "\u00f1\t\u00ed\u00af\u001e\u0016\u00fe\u00f3\ud84c\udecc\u00d7\u00e7\udbdc\udd01U\udae4\ude72\u00f0\u0099",
    }
    if where == "metadata":
        body = {"model": "claude", "metadata": body["supersedes"]}
    response = call(admin_api, "POST", "/v1/traces", body)
    field = "supersedes" if where == "extra" else "metadata"
    assert broke_the_rule(response, field) is None
    assert "plain JSON" in response.json()["message"]


# A view that fails as a bug would: the answer must not say how.
def _broken(request: Any) -> Any:
    raise RuntimeError("secret detail: postgres://user:password@db/memory")


urlpatterns = [path("v1/broken", _broken), path("", include("memoryproject.urls"))]


@pytest.mark.urls(__name__)
@pytest.mark.parametrize("debug", [False, True])
def test_a_server_error_under_v1_is_a_json_500_without_details(client, settings, debug):
    settings.DEBUG = debug
    client.raise_request_exception = False
    response = client.get("/v1/broken")
    assert response.status_code == 500
    assert response["Content-Type"] == "application/json"
    assert response.json() == {
        "code": "server_error",
        "message": "internal error; the server log has the details",
    }
    assert b"password" not in response.content and b"Traceback" not in response.content


@pytest.mark.parametrize(
    ("arguments", "field", "rule"),
    [
        ({"metadata": {"a": "\ud800"}}, "metadata", "lone surrogate U+D800"),
        ({"title": "x\udfff"}, "title", "lone surrogate U+DFFF"),
        ({"metadata": {"k": [[[[{"k": [1]}]]]] * 1}}, None, None),
    ],
)
def test_tool_arguments_follow_the_same_rules_as_bodies(arguments, field, rule):
    """MCP tools parse their arguments with the operation's input, as REST does its body."""
    from graph_app.operations import EPISODE_RECORD
    from memoryproject.errors import ApplicationError

    base = {**BODIES["/v1/graph/episodes"], **arguments}
    if field is None:
        assert EPISODE_RECORD.parse(base).metadata == arguments["metadata"]
        return
    with pytest.raises(ApplicationError) as refused:
        EPISODE_RECORD.parse(base)
    assert refused.value.field == field and rule in refused.value.message


def test_tool_arguments_nested_too_deeply_are_refused():
    from graph_app.operations import EPISODE_RECORD
    from memoryproject.errors import ApplicationError

    nested: Any = 1
    for _ in range(100):
        nested = [nested]
    with pytest.raises(ApplicationError) as refused:
        EPISODE_RECORD.parse({**BODIES["/v1/graph/episodes"], "metadata": {"deep": nested}})
    assert refused.value.field == "metadata"
    assert "nested more than 64 levels" in refused.value.message
