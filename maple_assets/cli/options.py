"""Click options generated from pydantic fields: name, type, default, bounds and help are the
field's, so each option of ``maple enrich`` is defined once.

A field ``max_batch_bytes`` becomes ``--max-batch-bytes``, a field with an alias its alias
(``budget_usd``: ``--budget``, ``maple_engine.spec.ALIASES``); a bool defaulting to False is a
flag, one defaulting to True a ``--no-...`` flag that turns it off; ``ge``/``gt``/``le``/``lt``
become an ``IntRange`` or ``FloatRange``; a ``Literal`` a choice; ``tuple[str, ...]`` and
``list[str]`` a repeatable option.
"""

import types
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal, TypeVar, Union, get_args, get_origin

import annotated_types
import click
from pydantic import AliasChoices, BaseModel
from pydantic.fields import FieldInfo

F = TypeVar("F", bound=Callable[..., Any])

# The flags that are not ``--name`` (``--no-name`` for a bool that is on) of a field's name or
# alias: one says what turning the option off skips, a repeatable one names one value.
FLAG_NAMES = {"check_images": "--no-image-check", "file_columns": "--file-column"}


def flag_name(field: str, info: FieldInfo) -> str:
    """The option's name on the command line: the field's alias, else its name, dashed."""
    if field in FLAG_NAMES:
        return FLAG_NAMES[field]
    alias = info.validation_alias
    name = str(alias.choices[-1]) if isinstance(alias, AliasChoices) else field
    dashed = name.replace("_", "-")
    return f"--no-{dashed}" if info.default is True else f"--{dashed}"


def model_options(
    model: type[BaseModel],
    fields: Iterable[str] | None = None,
    param_types: Mapping[str, click.ParamType[Any]] | None = None,
) -> Callable[[F], F]:
    """Decorate a click command with one option per field of ``model`` (or of ``fields``)."""
    names = list(model.model_fields if fields is None else fields)
    decorators = [
        field_option(name, model.model_fields[name], (param_types or {}).get(name))
        for name in names
    ]

    def decorate(command: F) -> F:
        for decorator in reversed(decorators):  # click lists them in the order given
            command = decorator(command)
        return command

    return decorate


def field_option(
    field: str, info: FieldInfo, param_type: click.ParamType[Any] | None = None
) -> Callable[[F], F]:
    """One field as a click option; ``param_type`` overrides the type the field implies."""
    settings: dict[str, Any] = {"help": info.description}
    annotation = _optional_inner(info.annotation)
    if annotation is bool:
        settings |= {"flag_value": not info.default, "default": info.default}
    elif get_origin(annotation) in (tuple, list):
        settings |= {"multiple": True}
    else:
        settings["type"] = param_type or field_type(annotation, info)
        if info.is_required():
            settings["required"] = True
        else:
            settings |= {"default": info.default, "show_default": info.default is not None}
    return click.option(flag_name(field, info), field, **settings)


def field_type(annotation: Any, info: FieldInfo) -> Any:
    """``click.Choice`` for a Literal, a range for bounded numbers, else the plain type."""
    if get_origin(annotation) is Literal:
        return click.Choice([str(arg) for arg in get_args(annotation)])
    bounds = _bounds(info)
    if annotation in (int, float) and bounds:
        kind = click.IntRange if annotation is int else click.FloatRange
        return kind(**bounds)
    return annotation


def _bounds(info: FieldInfo) -> dict[str, Any]:
    bounds: dict[str, Any] = {}
    for item in info.metadata:
        if isinstance(item, annotated_types.Ge):
            bounds["min"] = item.ge
        elif isinstance(item, annotated_types.Gt):
            bounds |= {"min": item.gt, "min_open": True}
        elif isinstance(item, annotated_types.Le):
            bounds["max"] = item.le
        elif isinstance(item, annotated_types.Lt):
            bounds |= {"max": item.lt, "max_open": True}
    return bounds


def _optional_inner(annotation: Any) -> Any:
    """``X`` for ``X | None``; any other annotation as it is."""
    if get_origin(annotation) in (Union, types.UnionType):
        args = [arg for arg in get_args(annotation) if arg is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation
