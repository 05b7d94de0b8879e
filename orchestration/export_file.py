"""The export file: its format, and reading one back without trusting it.

An import file may come from anywhere, so nothing in it is taken on faith before a row is
written: its size is capped (``IMPORT_MAX_BYTES``) before a byte is parsed, it is read line by
line, and every row is held to the rules its own door holds new data to: the API's contracts
for entities, episodes, facts and traces (the same bounds and wording), the model's columns for
the rest. The first problem found refuses the whole file, in one line that names the file's line
number, the field and the rule (``FILE line 12: fact.confidence: must be ...``). Whether the
rows' links stay inside the imported project needs the database: ``import_references``.
"""

from __future__ import annotations

import copy
import hashlib
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, BinaryIO, Literal, NamedTuple

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from pydantic import BaseModel, ConfigDict, Field, create_model

from audit_app.domain.chain import sha256_text
from audit_app.models import DeliveredText, ErasedText, InjectionRecord
from graph_app.contracts.entities import EntityUpsertInput
from graph_app.contracts.episodes import EpisodeRecordInput
from graph_app.contracts.facts import FactUpsertInput
from graph_app.contracts.fields import Sha256
from graph_app.models import Entity, Episode, EpisodeFile, GraphChange, TemporalFact
from memoryproject.contracts import AwareDatetime, Input, has_nul, json_value_problem
from memoryproject.errors import ApplicationError
from memoryproject.models import Project
from memoryproject.timeutil import TimestampError, to_utc
from sessions_app.contracts import TraceInput
from sessions_app.models import SessionSummary, Trace
from sessions_app.selectors import TRACE_COLUMNS

FORMAT = "memoryproject-export"
VERSION = 1

#: Table name -> model, in insertion order (a row only refers to rows before it, except a
#: fact's successor, which the deferred foreign-key check allows within the transaction).
TABLES: dict[str, type[models.Model]] = {
    "entity": Entity,
    "episode": Episode,
    "episode_entity": Episode.entities.through,
    "episode_file": EpisodeFile,
    "fact": TemporalFact,
    "graph_change": GraphChange,
    "trace": Trace,
    "session_summary": SessionSummary,
    "delivered_text": DeliveredText,
    "erased_text": ErasedText,
    "receipt": InjectionRecord,
}


class PortabilityError(ApplicationError):
    """An export or import refused, naming why (the command exits 2)."""


class Row(NamedTuple):
    line: int  # the file's line number (the header is line 1)
    values: dict[str, Any]


@dataclass
class ImportFile:
    header: dict[str, Any]
    rows: dict[str, list[Row]]  # by table, every table present


# --- the rules of each row ---------------------------------------------------------------------

#: Column -> the API contract and field whose rule it is held to. A column whose value the
#: model lets be blank or null is checked only when it holds something (the contract's
#: "not given").
_CONTRACTS: dict[str, dict[str, tuple[type[BaseModel], str]]] = {
    "entity": {
        "slug": (EntityUpsertInput, "entity_id"),
        **{c: (EntityUpsertInput, c) for c in ("kind", "name", "aliases")},
    },
    "episode": {
        c: (EpisodeRecordInput, c)
        for c in (
            "title",
            "category",
            "content",
            "files_touched",
            "entities_mentioned",
            "occurred_at",
            "external_id",
            "metadata",
        )
    },
    "fact": {
        **{
            c: (FactUpsertInput, c)
            for c in ("predicate", "object_value", "singular", "valid_from", "confidence")
        },
        "source_episode_id": (FactUpsertInput, "source_episode"),
    },
    "trace": {c: (TraceInput, c) for c in TRACE_COLUMNS},
    # A saved summary's scores are a trace's scores.
    "session_summary": {c: (TraceInput, c) for c in ("trust_score", "risk", "decision")},
}


def _row_contract(table: str, columns: dict[str, tuple[type[BaseModel], str]]) -> type[Input]:
    """One model holding each column to its contract field's rule (bounds, types, wording),
    without the contract's defaults or cross-field rules (a stored row is not a request)."""
    fields: dict[str, Any] = {}
    for column, (contract, name) in columns.items():
        info = copy.copy(contract.model_fields[name])
        info.default = None
        fields[column] = (info.annotation, info)
    return create_model(f"{table}_row", __base__=Input, **fields)


_ROW_CONTRACTS = {table: _row_contract(table, cols) for table, cols in _CONTRACTS.items()}


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _type_problem(field: models.Field[Any, Any], value: Any) -> str | None:
    if isinstance(field, models.BooleanField):
        return None if isinstance(value, bool) else f"must be true or false, got {value!r:.60}"
    if isinstance(field, models.IntegerField):
        ok = isinstance(value, int) and not isinstance(value, bool)
        return None if ok else f"must be an integer, got {value!r:.60}"
    if isinstance(field, models.FloatField):
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        return None if ok else f"must be a number, got {value!r:.60}"
    if not isinstance(value, str):
        return f"must be a string, got {type(value).__name__}"
    if "\x00" in value:
        return "must not contain NUL characters"
    if isinstance(field, models.UUIDField):
        try:
            uuid.UUID(value)
        except ValueError:
            return f"'{value:.60}' is not a UUID"
    return None


def _column_problem(field: models.Field[Any, Any], value: Any) -> str | None:
    """What is wrong with ``value`` for the column (None: nothing): its type, its null rule,
    and the model's validators (lengths, ranges, choices)."""
    if value is None:
        return None if field.null else "is required"
    if isinstance(field, models.JSONField):
        return "must not contain NUL characters" if has_nul(value) else None
    if isinstance(field, models.DateTimeField):
        try:
            to_utc(value)
        except TimestampError as exc:
            return str(exc)
        return None
    # A link is held to the rules of the key it names.
    target = field.target_field if isinstance(field, models.ForeignKey) else field
    problem = _type_problem(target, value)
    if problem is not None:
        return problem
    python = target.to_python(value)
    try:
        target.run_validators(python)
    except ValidationError as exc:
        return "; ".join(exc.messages)
    if field.choices and python not in {choice for choice, _ in field.flatchoices}:
        allowed = ", ".join(str(choice) for choice, _ in field.flatchoices)
        return f"must be one of {allowed}, got {value!r:.60}"
    return None


def _row_check(table: str, values: dict[str, Any], line: int) -> None:
    model = TABLES[table]
    where = f"FILE line {line}: {table}"
    columns = {f.attname: f for f in model._meta.concrete_fields}
    unknown = [name for name in values if name not in columns]
    if unknown:
        raise PortabilityError(
            f"{where}.{unknown[0]}: unknown column (columns: {', '.join(columns)})"
        )
    problem = json_value_problem(values)
    if problem is not None:
        raise PortabilityError(f"{where}.{problem[0]}: {problem[1]}")
    # The API's wording first; the columns then hold what its contract does not cover.
    contract = _ROW_CONTRACTS.get(table)
    if contract is not None:
        given = {
            name: values[name]
            for name in contract.model_fields
            if values.get(name) is not None and values[name] != ""
        }
        try:
            contract.parse(given)
        except ApplicationError as exc:
            raise PortabilityError(f"{where}.{exc.message}") from None
    for name, field in columns.items():
        if name == "project_id":
            continue  # every row lands in the imported project, whatever the file says
        rule = _column_problem(field, values.get(name))
        if rule is not None:
            raise PortabilityError(f"{where}.{name}: {rule}")
    if table == "delivered_text" and sha256_text(values["text"]) != values["sha256"]:
        # Recomputed: the store is shared by every project, keyed by the text's hash.
        raise PortabilityError(f"{where}.sha256: is not the SHA-256 of its text")


# --- the header --------------------------------------------------------------------------------


class _ProjectHeader(Input):
    model_config = ConfigDict(extra="ignore", strict=True, frozen=True)

    id: Annotated[int, Field(ge=1)]
    slug: str
    name: str = ""
    created_at: AwareDatetime


class _RevisionHeader(Input):
    model_config = ConfigDict(extra="ignore", strict=True, frozen=True)

    revision: Annotated[int, Field(ge=0)]
    changes: Annotated[int, Field(ge=0)]
    head_hash: Sha256


class _Header(Input):
    model_config = ConfigDict(extra="ignore", strict=True, frozen=True)

    format: Literal["memoryproject-export"]
    version: Literal[1]
    exported_at: AwareDatetime
    project: _ProjectHeader
    graph_revision: _RevisionHeader | None = None
    counts: dict[str, Annotated[int, Field(ge=0)]]
    body_sha256: Sha256


def _header_check(header: Any, path: Path) -> dict[str, Any]:
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise PortabilityError(f"FILE line 1: {path} is not a {FORMAT} file")
    if header.get("version") != VERSION:
        raise PortabilityError(
            f"FILE line 1: format version {header.get('version')!r} is not supported "
            f"(this is {VERSION})"
        )
    try:
        _Header.parse(header)
    except ApplicationError as exc:
        raise PortabilityError(f"FILE line 1: {exc.message}") from None
    for name in ("id", "slug", "name"):
        column = Project._meta.get_field(name)
        assert isinstance(column, models.Field)
        rule = _column_problem(column, header["project"].get(name, ""))
        if rule is not None:
            raise PortabilityError(f"FILE line 1: project.{name}: {rule}")
    unknown = sorted(set(header["counts"]) - set(TABLES))
    if unknown:
        raise PortabilityError(f"FILE line 1: counts.{unknown[0]}: unknown table")
    return header


# --- reading -----------------------------------------------------------------------------------


def _lines(handle: BinaryIO, limit: int, path: Path) -> Iterator[tuple[int, bytes]]:
    """The file's lines with their numbers, refusing once more than ``limit`` bytes were read
    (the file may have grown since its size was checked, or be no regular file)."""
    read = 0
    for number, raw in enumerate(handle, start=1):
        read += len(raw)
        if read > limit:
            raise PortabilityError(_too_large(path, limit))
        yield number, raw


def _too_large(path: Path, limit: int) -> str:
    return (
        f"FILE: {path} is larger than the import limit of {limit} bytes (IMPORT_MAX_BYTES); "
        "nothing was read"
    )


def _parse(number: int, raw: bytes) -> Any:
    try:
        return json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
    except UnicodeDecodeError:
        raise PortabilityError(f"FILE line {number}: is not UTF-8 text") from None
    except (ValueError, RecursionError) as exc:
        raise PortabilityError(f"FILE line {number}: is not JSON ({exc})") from None


def _body_line(number: int, line: Any) -> tuple[str, dict[str, Any]]:
    if not isinstance(line, dict) or set(line) != {"table", "row"}:
        raise PortabilityError(f'FILE line {number}: must be an object {{"table", "row"}}')
    table, values = line["table"], line["row"]
    if table not in TABLES:
        raise PortabilityError(
            f"FILE line {number}: table: unknown table {table!r:.60} (known: {', '.join(TABLES)})"
        )
    if not isinstance(values, dict):
        raise PortabilityError(f"FILE line {number}: {table}.row: must be a JSON object")
    return table, values


def import_file_read(path: Path) -> ImportFile:
    """The header and every row of the export at ``path``, each checked; raises a
    PortabilityError naming the first problem (nothing is written here)."""
    limit = int(settings.IMPORT_MAX_BYTES)
    try:
        if path.stat().st_size > limit:
            raise PortabilityError(_too_large(path, limit))
        with path.open("rb") as handle:
            return _read(handle, limit, path)
    except OSError as exc:
        raise PortabilityError(f"FILE: cannot read {path} ({exc.strerror})") from None


def _read(handle: BinaryIO, limit: int, path: Path) -> ImportFile:
    lines = _lines(handle, limit, path)
    first = next(lines, None)
    if first is None:
        raise PortabilityError(f"FILE line 1: {path} is empty: no header")
    header = _header_check(_parse(*first), path)
    body = hashlib.sha256()
    rows: dict[str, list[Row]] = {name: [] for name in TABLES}
    seen: dict[tuple[str, Any], int] = {}
    for number, raw in lines:
        body.update(raw)
        if not raw.strip():
            continue
        table, values = _body_line(number, _parse(number, raw))
        _row_check(table, values, number)
        key = (table, values.get(TABLES[table]._meta.pk.attname))
        if key in seen:
            raise PortabilityError(
                f"FILE line {number}: {table}.{TABLES[table]._meta.pk.attname}: "
                f"{key[1]!r:.60} is also the key of line {seen[key]}"
            )
        seen[key] = number
        rows[table].append(Row(number, values))
    if body.hexdigest() != header["body_sha256"].lower():
        raise PortabilityError("FILE: body_sha256 does not match: the file is truncated or edited")
    counted = {name: len(found) for name, found in rows.items() if found}
    expected = {name: count for name, count in header["counts"].items() if count}
    if counted != expected:
        raise PortabilityError(f"FILE: counts {counted} do not match the header's {expected}")
    return ImportFile(header=header, rows=rows)
