"""DRF glue shared by every app: the error format, the OpenAPI schema of every view (its error
answers and id patterns included) and the project-choosing mixin.

Every error answers JSON ``{"code", "message", "fields"?}``; ``fields`` maps each offending field
to the rules it broke. (memoryproject.middleware gives the same shape to errors raised outside
DRF's views; memoryproject.drf_base holds the body parser and the pagination.)
"""

from __future__ import annotations

import functools
import re
from typing import Any, ClassVar, Literal, cast

from django.conf import settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.http import Http404
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from pydantic import BaseModel, ConfigDict, create_model
from rest_framework import exceptions, generics, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from memoryproject.auth import api_key_of
from memoryproject.contracts import BlankIsNone, Caller, Input, Output
from memoryproject.errors import ApplicationError, PayloadTooLargeError, validation_error
from memoryproject.models import Project
from memoryproject.operations import Operation
from memoryproject.projects import Access, project_resolve

PROJECT_PARAM = OpenApiParameter(
    "project", str, description="Project slug (default: the key's single project or 'default')"
)
#: The project of an operation that spans every project the key may read.
SPANNING_PROJECT_PARAM = OpenApiParameter(
    "project", str, description="Narrow the answer to this one of the key's projects (default: all)"
)


def _flatten(detail: Any, prefix: str = "") -> dict[str, list[str]]:
    fields: dict[str, list[str]] = {}
    if isinstance(detail, dict):
        for key, value in detail.items():
            name = f"{prefix}.{key}" if prefix else str(key)
            if key == "non_field_errors" and not prefix:
                name = "body"
            fields.update(_flatten(value, name))
    elif isinstance(detail, list):
        if all(not isinstance(item, (dict, list)) for item in detail):
            fields[prefix or "body"] = [str(item) for item in detail]
        else:
            for index, item in enumerate(detail):
                fields.update(_flatten(item, f"{prefix}[{index}]"))
    else:
        fields[prefix or "body"] = [str(detail)]
    return fields


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    # Django's own (a view's Http404, PermissionDenied) as DRF turns them, so that they get the
    # shape of every error below.
    if isinstance(exc, Http404):
        exc = exceptions.NotFound(*exc.args)
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied(*exc.args)
    if isinstance(exc, RequestDataTooBig):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        exc = PayloadTooLargeError(f"body: must be at most {limit} bytes", field="body")
    if isinstance(exc, ApplicationError):
        return Response(exc.as_dict(), status=exc.status_code)
    if isinstance(exc, exceptions.ValidationError):
        fields = _flatten(exc.detail)
        message = "; ".join(f"{name}: {' '.join(msgs)}" for name, msgs in fields.items())
        return Response(
            {"code": "invalid", "message": message, "fields": fields},
            status=status.HTTP_400_BAD_REQUEST,
        )
    if isinstance(exc, exceptions.ParseError):
        return Response(
            {
                "code": "parse_error",
                "message": f"body: {exc.detail}",
                "fields": {"body": [f"must be a JSON object ({exc.detail})"]},
            },
            status=status.HTTP_400_BAD_REQUEST,
        )
    response = drf_exception_handler(exc, context)
    if response is not None and isinstance(exc, exceptions.APIException):
        codes = exc.get_codes()
        response.data = {
            "code": codes if isinstance(codes, str) else "error",
            "message": str(exc.detail),
        }
    return response


def request_body(request: Request) -> dict[str, Any]:
    """The JSON object a POST carries, or a 400 naming the body."""
    try:
        data = request.data
    except exceptions.UnsupportedMediaType as exc:
        raise ApplicationError(
            "body: must be JSON sent with 'Content-Type: application/json', "
            f"got '{request.content_type}'",
            field="body",
        ) from exc
    if not isinstance(data, dict):
        raise ApplicationError("body: must be a JSON object", field="body")
    return dict(data)


def caller_of(request: Request) -> Caller:
    """The REST caller as receipts record it: channel ``rest`` and the API key's label."""
    api_key = api_key_of(request)
    return Caller(channel="rest", client=api_key.label if api_key is not None else "")


class ProjectScopedMixin:
    """Resolves the project of a request by the one convention (see memoryproject.projects)."""

    request: Request

    def resolve_project(self, access: Access, data: Any = None) -> Project:
        """The call's project. Writes name it in the body; reads in the ``project`` query
        parameter. A POST that only reads (plan, compile) passes its body as ``data``: its
        ``project`` field is used, else the query parameter."""
        slug: Any = None
        if access == "write" or data is not None:
            source = data if data is not None else self.request.data
            if not isinstance(source, dict):
                raise ApplicationError("body: must be a JSON object", field="body")
            slug = source.get("project")
        if access == "read" and not slug:
            slug = self.request.query_params.get("project")
        return project_resolve(slug=slug or None, api_key=api_key_of(self.request), access=access)

    def visible_project_ids(self) -> list[int] | None:
        """Project ids this request may read (None: all, for keyless trusted callers)."""
        api_key = api_key_of(self.request)
        if api_key is None:
            return None
        return [p.pk for p in api_key.projects.all()]


_OPENAPI_TYPES = {
    "integer": OpenApiTypes.INT,
    "number": OpenApiTypes.FLOAT,
    "boolean": OpenApiTypes.BOOL,
}


_BOUNDS = {"minimum", "maximum", "minLength", "maxLength", "pattern"}


def query_parameters(model: type[Input], path_params: set[str]) -> list[OpenApiParameter]:
    """The OpenAPI query parameters of a GET operation, read off its input model (less the
    fields the URL path carries)."""
    params = []
    schema = model.model_json_schema()
    for name, prop in schema.get("properties", {}).items():
        if name in path_params:
            continue
        options = prop.get("anyOf", [prop])
        kind = next((o for o in options if o.get("type") != "null"), prop)
        openapi_type: Any
        if kind.get("format") == "date-time":
            openapi_type = OpenApiTypes.DATETIME
        elif _BOUNDS & set(kind):  # its bounds and pattern, as the model declares them
            openapi_type = {k: v for k, v in kind.items() if k in _BOUNDS | {"type", "format"}}
        else:
            openapi_type = _OPENAPI_TYPES.get(kind.get("type", ""), OpenApiTypes.STR)
        params.append(
            OpenApiParameter(
                name,
                openapi_type,
                description=prop.get("description", ""),
                required=name in schema.get("required", []),
                enum=kind.get("enum"),
                default=prop.get("default"),
            )
        )
    return params


@functools.cache
def _body_model(model: type[Input], path_params: frozenset[str]) -> type[Input]:
    """The request body of a POST operation: its input model less the fields the URL path
    carries (same name, so OpenAPI shows one component)."""
    if not path_params & set(model.model_fields):
        return model
    fields: Any = {
        name: (field.annotation, field)
        for name, field in model.model_fields.items()
        if name not in path_params
    }
    return create_model(model.__name__, __base__=Input, **fields)


class ErrorAnswer(BaseModel):
    """Every error of the API: a machine-readable ``code``, a ``message`` naming the field and
    the rule (``n: must be from 1 to 50, got 0``) and, for invalid input, ``fields``: each
    offending field with the rules it broke. Some errors add context keys."""

    model_config = ConfigDict(extra="allow")

    code: str
    message: str
    fields: dict[str, list[str]] | None = None


ERROR_RESPONSES = {
    400: "Invalid input: the message and `fields` name the field and the rule.",
    401: "No API key, or an unknown or revoked one.",
    403: "The key's scope or projects do not allow this call.",
    404: "No such item in the projects the key can see, or no such endpoint.",
    405: "The endpoint does not take this HTTP method.",
    413: "The body is larger than the server accepts.",
    429: "Too many failed authentication attempts: wait for `Retry-After` seconds.",
}

#: Answers only a call with a body may get.
WRITE_ERROR_RESPONSES = {
    409: "The call contradicts what is stored (e.g. an id or external_id already used with "
    "other content); the message names the field.",
}

#: OpenAPI of the ids that URL paths carry (the views' converters take any text).
PATH_ID_SCHEMAS: dict[str, dict[str, Any]] = {
    "trace_id": {"type": "string", "format": "uuid"},
    "fact_id": {"type": "string", "pattern": r"^(\[FACT:)?fact_[0-9a-f]{16}\]?$"},
    "episode_id": {
        "type": "string",
        "minLength": 1,
        "maxLength": 240,
        "pattern": r"^[^\u0000-\u001f]+$",
    },
    "record_id": {"type": "integer", "minimum": 1, "maximum": 2**63 - 1},
}


class ApiSchema(AutoSchema):
    """OpenAPI of every /v1 view: its own answers plus the JSON error answers (401, 403, 404,
    405, 413, 429 and 400) that any call may get (409 too for calls with a body), and the
    patterns of the ids in its path."""

    def _get_response_bodies(self, direction: Any = "response") -> dict[str, Any]:
        responses = super()._get_response_bodies(direction)
        errors = dict(ERROR_RESPONSES)
        if self.method not in ("GET", "HEAD", "OPTIONS"):
            errors.update(WRITE_ERROR_RESPONSES)
        for code, description in sorted(errors.items()):
            responses.setdefault(
                str(code),
                self._get_response_for_code(
                    OpenApiResponse(ErrorAnswer, description=description), str(code)
                ),
            )
        return responses

    def _blank_is_absent(self) -> set[str]:
        """The query parameters that read an empty value as "not given": the project, the
        filters and the page (limit, offset) of a list."""
        return {"project", "limit", "offset"} | {p["name"] for p in self._get_filter_parameters()}

    def _get_parameters(self) -> list[dict[str, Any]]:
        # Say which parameters read an empty value as "not given" (the others refuse it).
        blank_is_absent = self._blank_is_absent()
        params = super()._get_parameters()
        for param in params:
            if param["in"] == "query" and param["name"] in blank_is_absent:
                param["allowEmptyValue"] = True
        return params

    def _resolve_path_parameters(self, variables: list[str]) -> list[dict[str, Any]]:
        params = super()._resolve_path_parameters(variables)
        for param in params:
            known = PATH_ID_SCHEMAS.get(param["name"])
            if known is not None and "pattern" not in param["schema"]:
                param["schema"] = dict(known)
        return params


class OperationSchema(ApiSchema):
    """OpenAPI of an OperationView, read off its operation's input and output models."""

    @property
    def _operation_view(self) -> OperationView:
        return cast(OperationView, self.view)

    def _path_params(self) -> set[str]:
        return set(re.findall(r"{(\w+)}", self.path))

    def _lists(self) -> bool:
        return self.method == "GET" and self._operation_view.method != "get"

    def get_override_parameters(self) -> list[Any]:
        spans = self._operation_view.operation.spans_projects
        project = SPANNING_PROJECT_PARAM if spans else PROJECT_PARAM
        params: list[Any] = [*super().get_override_parameters(), project]
        if self.method == "GET" and self._operation_view.method == "get":
            params += query_parameters(self._operation_view.operation.input, self._path_params())
        return params

    def _resolve_path_parameters(self, variables: list[str]) -> list[dict[str, Any]]:
        params = super()._resolve_path_parameters(variables)
        fields = self._operation_view.operation.input.model_json_schema().get("properties", {})
        for param in params:
            field = fields.get(param["name"], {})
            if param["name"] not in PATH_ID_SCHEMAS and "pattern" in field:
                keys = ("type", "pattern", "minLength", "maxLength")
                param["schema"] = {k: field[k] for k in keys if k in field}
        return params

    def _blank_is_absent(self) -> set[str]:
        if not (self.method == "GET" and self._operation_view.method == "get"):
            return super()._blank_is_absent()
        # A GET read off its input model: the fields whose rule reads "" as none (time travel's
        # known_at), not its limit and offset, which refuse it.
        fields = self._operation_view.operation.input.model_fields
        return {"project"} | {name for name, f in fields.items() if BlankIsNone in f.metadata}

    def get_operation_id(self) -> str:
        operation_id = super().get_operation_id()
        return operation_id.replace("_retrieve", "_list") if self._lists() else operation_id

    def get_filter_backends(self) -> list[Any]:
        return list(self._operation_view.filter_backends) if self._lists() else []

    def _get_pagination_parameters(self) -> list[Any]:
        paginator = self._get_paginator() if self._lists() else None
        return paginator.get_schema_operation_parameters(self.view) if paginator else []

    def get_request_serializer(self) -> Any:
        if self.method != "POST":
            return None
        model: Any = self._operation_view.operation.input
        return _body_model(model, frozenset(self._path_params()))

    def get_response_serializers(self) -> Any:
        if self._lists():
            return self._operation_view.list_output
        operation = self._operation_view.operation
        if operation.created is not None:
            return {201: operation.output, 200: operation.output}
        return operation.output


def refuse_unknown_query(request: Request, known: set[str]) -> None:
    """A query parameter the endpoint does not read is refused, as an unknown body field is:
    a misspelt filter must not answer the unfiltered list."""
    unknown = sorted(set(request.query_params) - known)
    if unknown:
        allowed = ", ".join(sorted(known)) or "none"
        name = unknown[0][:60]
        raise validation_error(name, f"unknown query parameter (allowed: {allowed})")


class OperationView(generics.GenericAPIView, ProjectScopedMixin):
    """The REST door of one operation: resolves the project by the one convention, parses the
    body (POST) or the query string (GET) with the operation's input model and answers its
    output as JSON. ``access`` of a read-only POST (plan, compile) is "read".

    A POST view may also list its collection on GET: it sets ``list_output`` (the page model),
    ``get_queryset``, ``list_row`` (a row's output, from a selector) and its FilterSet."""

    operation: ClassVar[Operation[Any, Any]]
    method: ClassVar[Literal["get", "post"]] = "post"
    list_output: ClassVar[type[Output] | None] = None
    required_scope: ClassVar[str | None] = None
    schema = OperationSchema()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.http_method_names = [cls.method, "options"]
        if cls.list_output is not None:
            cls.http_method_names.append("get")
        operation = cls.__dict__.get("operation")
        if operation is not None and (operation.access == "read" or operation.scope):
            # A POST that only reads (plan, compile), or an auditors' read (admin).
            cls.required_scope = operation.required_scope

    def project_for(self, data: dict[str, Any] | None) -> Project:
        """The call's project (a view may override it, e.g. to find it from the item)."""
        return self.resolve_project(self.operation.access, data)

    def _narrowed_to(self, data: dict[str, Any] | None) -> Project | None:
        """The project an operation spanning the identity's projects is narrowed to (None:
        it names none, so it spans them all)."""
        named = data if data is not None else self.request.query_params
        return self.project_for(data) if named.get("project") else None

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)  # authentication and permissions first
        if request.method in ("GET", "POST"):
            refuse_unknown_query(request, self.query_names(request.method))

    def query_names(self, method: str) -> set[str]:
        """The query parameters this view reads for ``method`` (the OpenAPI schema's)."""
        if method == "POST":
            return {"project"}
        if self.method == "get":
            return {"project", *self.operation.input.model_fields}
        filterset = getattr(self, "filterset_class", None)
        filters = set(filterset.base_filters) if filterset is not None else set()
        return {"project", "limit", "offset", *filters}

    def _answer(self, data: dict[str, Any] | None) -> Response:
        operation = self.operation
        project = self._narrowed_to(data) if operation.spans_projects else self.project_for(data)
        if data is None:
            query = {k: v for k, v in self.request.query_params.items() if k != "project"}
            params = operation.parse({**query, **self.kwargs}, strict=False)
        else:
            body = {k: v for k, v in data.items() if k != "project"}
            params = operation.parse({**body, **self.kwargs})
        result = operation(
            project=project,
            params=params,
            caller=caller_of(self.request),
            identity=api_key_of(self.request),
        )
        created = operation.created is not None and operation.created(result)
        return Response(result.as_json(), status=201 if created else 200)

    def list_row(self, row: Any) -> Output:
        raise NotImplementedError

    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        if self.method == "get":
            return self._answer(None)
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        return self.get_paginated_response([self.list_row(row).as_json() for row in page or []])

    def post(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return self._answer(request_body(request))
