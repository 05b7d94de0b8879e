"""Reading a contract stored earlier (a review's signals or context, kept as JSON) with the
contract model as it reads now, so a stored value outlives a model that gained or changed a
field."""

from __future__ import annotations

from collections.abc import Mapping
from types import NoneType, UnionType
from typing import Any, Literal, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from memoryproject.errors import ApplicationError

#: Where a rebuilt model that keeps extra keys names the fields the stored value did not record.
NOT_RECORDED = "not_recorded"
M = TypeVar("M", bound=BaseModel)


def _empty(annotation: Any) -> Any:
    """The empty value of a type: None when it admits None, else [], {}, "", False or 0."""
    origin, args = get_origin(annotation), get_args(annotation)
    if annotation is None or annotation is NoneType or NoneType in args:
        return None
    if origin in (Union, UnionType):
        return _empty(args[0])
    if origin is Literal:
        return args[0]
    kind = origin or annotation
    empties: dict[Any, Any] = {list: [], tuple: [], set: [], frozenset: [], dict: {}, str: ""}
    if kind in empties:
        return empties[kind]
    if kind is bool:
        return False
    return 0 if kind in (int, float) else None


def review_stored(stored: Any, model: type[M], *, what: str) -> M:
    """What a review stored (its signals or context) read as ``model`` reads now, so a review
    stored before ``model`` gained or changed a field is still delivered: a field it lacks
    takes its default, or when it has none the empty value of its type, and a stored value
    the model no longer accepts is replaced the same way; the fields so filled are named under
    ``not_recorded`` when the model keeps extra keys. ``what`` names the stored field in the
    error raised only when even that does not validate."""
    data: dict[str, Any] = dict(stored) if isinstance(stored, Mapping) else {}
    fields = model.model_fields
    filled = [name for name, info in fields.items() if info.is_required() and name not in data]
    try:
        model.model_validate(data | {name: _empty(fields[name].annotation) for name in filled})
    except ValidationError as exc:
        refused = {str(error["loc"][0]) for error in exc.errors() if error["loc"]}
        filled += sorted(name for name in refused & set(fields) if name not in filled)
    for name in filled:
        info = fields[name]
        data[name] = (
            _empty(info.annotation)
            if info.is_required()
            else info.get_default(call_default_factory=True)
        )
    if filled and model.model_config.get("extra") == "allow":
        data[NOT_RECORDED] = filled
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ApplicationError(
            f"review: its stored {what} cannot be read as {model.__name__} "
            f"({exc.error_count()} errors)"
        ) from None
