"""Typed contracts: one input and one output definition per operation, shared by every door.

An operation's input is an ``Input`` model: its fields, defaults, bounds and rules are declared
once and read by the service signature, the DRF view (and through it the OpenAPI schema) and the
MCP tool (its argument schema). ``Input.parse`` is the one validation path: a bad value becomes an
``ApplicationError`` whose message names the field and the rule (``n: must be from 1 to 50, got
0``), so REST answers 400 and MCP a tool error with the same words.

Outputs are ``Output`` models: services return them with real types (aware datetimes, ints) and
adapters render them with ``as_json()``, where timestamps become ISO-8601 UTC strings. An output
also reads like its JSON body (``result["fact"]["id"]``) for scripts and tests.

Pure pydantic: no Django import, so services, adapters and the domain can share it.
"""

from __future__ import annotations

import functools
import inspect
import math
import re
from collections.abc import Callable, Mapping
from datetime import datetime
from functools import cached_property
from typing import Annotated, Any, ClassVar, Literal, Protocol, Self, TypeVar, cast, overload

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    PlainSerializer,
    PlainValidator,
    ValidationError,
    WithJsonSchema,
    model_serializer,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import PydanticCustomError, core_schema
from pydantic_core.core_schema import SerializerFunctionWrapHandler

from memoryproject.domain.screening import text_mask
from memoryproject.errors import ApplicationError
from memoryproject.timeutil import TimestampError, iso, to_utc

# --- rules shared by every door ---------------------------------------------------------------


def rule_error(rule: str) -> PydanticCustomError:
    """A validation failure whose text is the house rule (the field is named by the caller)."""
    return PydanticCustomError("rule", "{rule}", {"rule": rule})


def aware_datetime(value: object) -> datetime:
    """``value`` (an ISO-8601 string with a timezone, or an aware datetime) in UTC."""
    try:
        return to_utc(value)
    except TimestampError as exc:
        raise rule_error(str(exc)) from None


def parse_bool(value: object) -> bool:
    """The one boolean rule for text inputs (query parameters, environment): true/false, 1/0,
    yes/no, on/off, case-insensitive; JSON booleans as they are."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in {"true", "1", "yes", "on"}:
        return True
    if text in {"false", "0", "no", "off"}:
        return False
    raise rule_error(f"must be true or false, got '{value}'")


def _no_nul(value: str) -> str:
    # PostgreSQL cannot store NUL in text or jsonb; refuse it on every database alike.
    if "\x00" in value:
        raise rule_error("must not contain NUL characters")
    return value


def has_nul(value: Any) -> bool:
    """Whether a JSON value holds a NUL character anywhere (keys included): PostgreSQL cannot
    store one in text or jsonb, so every door refuses it on every database alike."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(has_nul(k) or has_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(has_nul(item) for item in value)
    return False


#: How deeply a JSON value (a body, tool arguments, metadata) may nest.
MAX_JSON_DEPTH = 64
#: The largest offset a paginated answer accepts (beyond every real collection, within every
#: database's integers).
MAX_OFFSET = 1_000_000_000


def _text_problem(text: str) -> str | None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"must be valid Unicode text (lone surrogate U+{ord(text[exc.start]):04X})"
    return None


def json_value_problem(value: Any, *, where: str = "") -> tuple[str, str] | None:
    """The first part of a JSON value no door accepts, as (field, rule): nesting deeper than
    MAX_JSON_DEPTH, or a lone surrogate (not text in any encoding); None when there is none.
    Iterative, so no depth can overflow it. (NUL characters are refused by each field's own
    rule, ``NoNul`` / ``has_nul``, which names the field as the caller knows it.)"""
    stack: list[tuple[Any, str, int]] = [(value, where, 0)]
    while stack:
        item, path, depth = stack.pop()
        if isinstance(item, str):
            rule = _text_problem(item)
            if rule:
                return path or "body", rule
            continue
        if not isinstance(item, dict | list):
            continue
        if depth >= MAX_JSON_DEPTH:
            return path or "body", f"must not be nested more than {MAX_JSON_DEPTH} levels deep"
        if isinstance(item, list):
            stack.extend((v, f"{path}[{i}]", depth + 1) for i, v in enumerate(item))
            continue
        for key, child in item.items():
            rule = _text_problem(key) if isinstance(key, str) else None
            if rule:
                return path or "body", f"keys {rule}"
            stack.append((child, f"{path}.{key}" if path else str(key), depth + 1))
    return None


def json_value_error(where: str, rule: str) -> ApplicationError:
    """The error of a ``json_value_problem``: the message names the exact place, ``fields``
    the top-level field it is in."""
    top = re.split(r"[.\[]", where, maxsplit=1)[0] or "body"
    return ApplicationError(f"{where}: {rule}", field=top)


def _not_blank(value: str) -> str:
    if not value.strip():
        raise rule_error("must not be empty")
    return value


def _finite(value: float) -> float:
    if not math.isfinite(value):
        raise rule_error(f"must be a finite number, got {value}")
    return value


#: A timestamp input: ISO-8601 with a timezone, answered as an aware UTC datetime.
AwareDatetime = Annotated[
    datetime,
    PlainValidator(aware_datetime),
    PlainSerializer(iso, return_type=str),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]
#: A timestamp output: rendered as ISO-8601 in UTC with a 'Z' suffix.
UtcDatetime = Annotated[datetime, PlainSerializer(iso, return_type=str)]


class _BlankIsNone:
    """An optional input where an empty string means "not given": it is read as None, and its
    JSON Schema (REST's OpenAPI, MCP's arguments) admits "" beside the value's own shapes."""

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_before_validator_function(
            lambda value: None if value == "" else value, handler(source)
        )

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        shape = handler(schema)
        options = shape["anyOf"] if set(shape) == {"anyOf"} else [shape]
        return {"anyOf": [*options, {"const": ""}]}


#: An optional input where an empty string means "not given".
BlankIsNone = _BlankIsNone()
#: A number from 0 to 1 (scores, thresholds, confidences).
Unit = Annotated[float, Field(ge=0.0, le=1.0), AfterValidator(_finite)]
#: The rule that text holds no NUL character (PostgreSQL refuses them).
NoNul = AfterValidator(_no_nul)
#: Text without NUL characters.
Text = Annotated[str, NoNul]
#: Text that must hold more than whitespace.
RequiredText = Annotated[str, AfterValidator(_not_blank), NoNul]


# --- inputs -----------------------------------------------------------------------------------


_UNION_TAGS = {"str", "int", "float", "bool", "list", "dict", "none", "nullable"}


def _where(loc: tuple[int | str, ...]) -> str:
    """The field a loc names, without the member tags pydantic adds inside unions."""
    name = ""
    for index, part in enumerate(loc):
        if isinstance(part, int):
            name += f"[{part}]"
        elif index and (part in _UNION_TAGS or any(c in part for c in "[(-")):
            continue
        else:
            name += f".{part}" if name else str(part)
    return name or "body"


def _got(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _bounds(model: type[BaseModel], name: str) -> tuple[Any, Any]:
    field = model.model_fields.get(name)
    low = high = None
    for meta in field.metadata if field is not None else ():
        low = getattr(meta, "ge", None) if getattr(meta, "ge", None) is not None else low
        high = getattr(meta, "le", None) if getattr(meta, "le", None) is not None else high
    return low, high


def _rule(model: type[BaseModel], error: Mapping[str, Any]) -> str:
    """The house wording of one pydantic error (what the value must be, and what it was)."""
    kind, ctx, value = error["type"], error.get("ctx") or {}, error.get("input")
    loc = error["loc"]
    low, high = _bounds(model, str(loc[0])) if loc else (None, None)
    span = f" from {low} to {high}" if low is not None and high is not None else ""
    if kind == "rule":
        return str(ctx["rule"])
    if kind == "missing":
        return "is required"
    if kind == "extra_forbidden":
        allowed = ", ".join(model.model_fields)
        return f"unknown field (allowed: {allowed})"
    if kind in {"int_type", "int_parsing", "int_from_float"}:
        return f"must be an integer{span}, got {_got(value)}"
    if kind in {"float_type", "float_parsing"}:
        return f"must be a number{span}, got {_got(value)}"
    if kind in {"greater_than_equal", "less_than_equal", "greater_than", "less_than"}:
        if span:
            return f"must be{span}, got {_got(value)}"
        return str(error["msg"]).replace("Input should be", "must be")
    if kind in {"bool_type", "bool_parsing"}:
        return f"must be true or false, got {_got(value)}"
    if kind == "string_type":
        return f"must be a string, got {type(value).__name__}"
    if kind == "string_too_short":
        return "must not be empty"
    if kind == "string_too_long":
        return f"must be at most {ctx['max_length']} characters, got {len(str(value))}"
    if kind == "too_long":
        return f"must have at most {ctx['max_length']} items, got {ctx.get('actual_length')}"
    if kind in {"list_type", "tuple_type"}:
        return f"must be a list, got {type(value).__name__}"
    if kind in {"dict_type", "model_type"}:
        return f"must be a JSON object, got {type(value).__name__}"
    if kind in {"literal_error", "enum"}:
        expected = str(ctx.get("expected", "")).replace("'", "").replace(" or ", ", ")
        return f"must be one of {expected}, got {_got(value)}"
    if kind == "uuid_parsing" or kind == "uuid_type":
        return f"'{value}' is not a UUID"
    return str(error["msg"]).removeprefix("Value error, ")


def validation_failure(model: type[BaseModel], exc: ValidationError) -> ApplicationError:
    """The ApplicationError of a failed parse: the first problem as its message, every
    problem under ``fields``. A rule may quote the value it refuses: a secret in it is masked
    (``[masked:<kind>]``), as it would be stored."""
    fields: dict[str, list[str]] = {}
    for error in exc.errors():
        name = text_mask(_where(tuple(error["loc"])))[0]
        fields.setdefault(name, []).append(f"{name}: {text_mask(_rule(model, error))[0]}")
    first = next(iter(fields))
    return ApplicationError(fields[first][0], field=first, extra={"fields": fields})


class Input(BaseModel):
    """The arguments of one operation. Strict: a JSON string is not an integer, unknown fields
    are refused; query-string doors parse with ``strict=False`` (their values are all text)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, defer_build=True)

    @classmethod
    def parse(cls, data: Mapping[str, Any] | None = None, *, strict: bool = True) -> Self:
        """Validates ``data`` or raises an ApplicationError naming the field and the rule."""
        if data is not None and not isinstance(data, Mapping):
            raise ApplicationError("body: must be a JSON object", field="body")
        problem = json_value_problem(dict(data or {}))
        if problem is not None:
            raise json_value_error(*problem)
        try:
            return cls.model_validate(dict(data or {}), strict=strict)
        except ValidationError as exc:
            raise validation_failure(cls, exc) from None
        except RecursionError:
            raise ApplicationError("body: is nested too deeply", field="body") from None


# --- outputs ----------------------------------------------------------------------------------


def _optional_when_omitted(schema: dict[str, Any], model: type) -> None:
    """A field an output leaves out when it is None is not required in its JSON Schema."""
    omitted: frozenset[str] = getattr(model, "omit_when_none", frozenset())
    if omitted and "required" in schema:
        schema["required"] = [name for name in schema["required"] if name not in omitted]
        if not schema["required"]:
            del schema["required"]


class Output(BaseModel):
    """What an operation answers. ``as_json()`` is the REST body and the MCP structured content;
    fields named in ``omit_when_none`` are left out of it rather than sent as null."""

    model_config = ConfigDict(
        frozen=True, extra="ignore", json_schema_extra=_optional_when_omitted, defer_build=True
    )
    omit_when_none: ClassVar[frozenset[str]] = frozenset()

    @model_serializer(mode="wrap")
    def _omit(self, handler: SerializerFunctionWrapHandler):  # type: ignore[no-untyped-def]
        # No return annotation: pydantic would take it as the serialized schema (empty).
        data = handler(self)
        if self.omit_when_none and isinstance(data, dict):
            for name in self.omit_when_none:
                if data.get(name) is None:
                    data.pop(name, None)
        return data

    def as_json(self) -> dict[str, Any]:
        return self._json

    @cached_property
    def _json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    # Reads like its JSON body.
    def __getitem__(self, key: str) -> Any:
        return self._json[key]

    def __contains__(self, key: object) -> bool:
        return key in self._json

    def get(self, key: str, default: Any = None) -> Any:
        return self._json.get(key, default)

    def keys(self) -> Any:
        return self._json.keys()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return self._json == dict(other)
        return super().__eq__(other)

    __hash__ = None  # type: ignore[assignment]


class Caller(Input):
    """Who asks, as injection receipts record it: the door (``rest``, ``mcp``, ``cli``), the
    authenticated identity (``client``: ``api_key:<prefix> (<name>)`` for an API key,
    ``local:<project>/<scope>`` for a trusted local process, or a command's name) and, beside it,
    the name the client gave itself (``client_reported``: an MCP client's ``initialize`` name),
    which nothing verifies."""

    channel: Annotated[RequiredText, Field(max_length=32)] = "rest"
    client: Annotated[Text, Field(max_length=200)] = ""
    client_reported: Annotated[Text, Field(max_length=200)] = ""

    def receipt_fields(self) -> dict[str, str]:
        """Who asks, as the keywords a receipt records it under."""
        return {
            "channel": self.channel,
            "client": self.client,
            "client_reported": self.client_reported,
        }


I = TypeVar("I", bound=Input)  # noqa: E741
_UNSET: Any = object()

# The service's shape as the type checker sees it: the project (a Django model here, kept a
# type variable so contracts import no Django), the input model and the answer.
_Project = TypeVar("_Project")
_Answer = TypeVar("_Answer")
_Project_in = TypeVar("_Project_in", contravariant=True)
_Input_in = TypeVar("_Input_in", bound=Input, contravariant=True)
_Answer_out = TypeVar("_Answer_out", covariant=True)


class ServiceBody(Protocol[_Project_in, _Input_in, _Answer_out]):
    """What ``@takes`` decorates when the service ignores who asks: ``f(*, project, params)``."""

    def __call__(self, *, project: _Project_in, params: _Input_in) -> _Answer_out: ...


class CallerServiceBody(Protocol[_Project_in, _Input_in, _Answer_out]):
    """What ``@takes`` decorates when the service records who asks (receipts, audit runs)."""

    def __call__(
        self, *, project: _Project_in, params: _Input_in, caller: Caller
    ) -> _Answer_out: ...


class Service(Protocol[_Project_in, _Input_in, _Answer_out]):
    """A ``@takes`` service as its callers see it: the parsed input (``params``), or its
    fields as keywords parsed by the input model; ``caller`` (or ``channel``/``client`` to build
    one) is optional and ignored by a service that does not record who asks. The project's type
    and the answer's are the decorated function's own."""

    @overload
    def __call__(
        self, *, project: _Project_in, params: _Input_in, caller: Caller | None = None
    ) -> _Answer_out: ...

    @overload
    def __call__(
        self,
        *,
        project: _Project_in,
        params: None = None,
        caller: Caller | None = None,
        channel: str = ...,
        client: str = ...,
        **fields: Any,
    ) -> _Answer_out: ...


class Takes(Protocol[I]):
    """The decorator ``takes(model)`` returns: it keeps the service's project and answer types
    and binds its ``params`` to ``model`` (a body whose ``params`` is another model is refused).
    """

    @overload
    def __call__(
        self, service: CallerServiceBody[_Project, I, _Answer]
    ) -> Service[_Project, I, _Answer]: ...

    @overload
    def __call__(
        self, service: ServiceBody[_Project, I, _Answer]
    ) -> Service[_Project, I, _Answer]: ...


def takes(model: type[I]) -> Takes[I]:
    """Gives a service ``f(*, project, params: model, caller?)`` its keyword door: Python
    callers may pass the fields themselves (``f(project=p, n=5)``), parsed by ``model`` exactly
    as REST and MCP arguments are, and ``channel``/``client`` for the caller.

    Typed for callers through ``Service``: ParamSpec cannot describe this door (it adds
    keyword-only parameters and the fields form), so the two call shapes are overloads."""

    def decorate(service: Callable[..., Any]) -> Any:
        wants_caller = "caller" in inspect.signature(service).parameters

        @functools.wraps(service)
        def call(
            *,
            params: I | None = None,
            caller: Caller | None = None,
            channel: Any = _UNSET,
            client: Any = _UNSET,
            **fields: Any,
        ) -> Any:
            context = {k: fields.pop(k) for k in ("project",) if k in fields}
            if params is None:
                params = model.parse(fields)
            elif fields:
                raise TypeError(f"{service.__name__}: pass params or fields, not both")
            if wants_caller:
                if caller is None:
                    given = {"channel": channel, "client": client}
                    caller = Caller.parse({k: v for k, v in given.items() if v is not _UNSET})
                context["caller"] = caller
            return service(params=params, **context)

        return call

    # The runtime wrapper is untyped by nature (it takes **fields); Takes states its contract.
    return cast("Takes[I]", decorate)


class WitnessCheck(Output):
    """The database held to the witness (signed heads and checkpoints kept outside it)."""

    state: Literal["verified", "failed", "unanchored"] = Field(
        description="verified: everything the witness signed is still in the database as it "
        "was; failed: something is not (problems name what, since which witnessed point); "
        "unanchored: no witness is configured, so nothing outside the database vouches for it."
    )
    problems: list[str] = Field(default_factory=list)
    witnessed_seq: int | None = Field(
        default=None, description="The newest position (log seq or change-log size) witnessed."
    )
    witnessed_at: str | None = Field(default=None, description="When it was witnessed (UTC).")
    since: str | None = Field(
        default=None, description="The witnessed point the check held the database to."
    )
    unwitnessed: int = Field(
        default=0,
        description="Records after the newest witnessed point (appended since; a head is "
        "witnessed after each commit, a checkpoint by cron and after maintenance).",
    )
    key_id: str | None = Field(default=None, description="The witness public key's id.")

    @classmethod
    def unanchored(cls, what: str) -> WitnessCheck:
        return cls(
            state="unanchored",
            problems=[
                "no witness is configured (WITNESS_DIR=off): nothing outside the database "
                f"vouches for {what}"
            ],
        )

    @classmethod
    def held(
        cls,
        problems: list[str],
        *,
        newest: tuple[int, str, str] | None,
        current: int,
        key_id: str,
    ) -> WitnessCheck:
        """The verdict: ``newest`` is the newest witnessed point (position, time, label),
        ``current`` the database's position now."""
        seq, at, label = newest if newest is not None else (None, None, None)
        return cls(
            state="failed" if problems else "verified",
            problems=problems,
            witnessed_seq=seq,
            witnessed_at=at,
            since=label,
            unwitnessed=max(0, current - (seq or 0)),
            key_id=key_id,
        )
