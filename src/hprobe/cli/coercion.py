"""Option values coerced without pydantic where typer's result cannot differ.

typer builds a pydantic TypeAdapter for every option of the command it runs,
set or not, so importing pydantic (0.2 s here) is a quarter of a warm `hprobe
check`. hprobe's options are strings, booleans, one integer and paths through
its own parsers. A string, a list of strings and a parser's result are what
typer's adapters return for them; those are coerced here. Anything else (an
integer, a choice, a type added later) goes to typer's own coercion, built only
when such a value is given, so its messages stay typer's."""

from __future__ import annotations

import types
from typing import Any, Union, get_args, get_origin


def install() -> None:
    """Route typer's parameter coercion through `_LightParam`; nothing when
    this typer lacks the hooks (another version keeps its own coercion)."""
    try:
        from typer import _coercion
        from typer.core import _TyperParameter
    except ImportError:
        return
    if not (
        hasattr(_TyperParameter, "get_runtime_param")
        and hasattr(_coercion, "RuntimeParam")
        and hasattr(_coercion, "build_runtime_param")
    ):
        return
    base = _coercion.RuntimeParam
    build = _coercion.build_runtime_param

    class _LightParam(base):  # type: ignore[misc, valid-type]
        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            light = _light(self.annotation, self.parameter_info, value)
            if light is not _UNHANDLED:
                return light
            # typer's own, built (and pydantic imported) only for such a value.
            return build(param.type_descriptor)._coerce_value(value, param=param, ctx=ctx)

    def get_runtime_param(self: Any) -> Any:
        if self._runtime_param is None:
            descriptor = self.type_descriptor
            if descriptor.file_annotation is None:
                self._runtime_param = _LightParam(
                    parameter_info=descriptor.parameter_info, annotation=descriptor.annotation
                )
            else:
                self._runtime_param = build(descriptor)
        return self._runtime_param

    _TyperParameter.get_runtime_param = get_runtime_param  # type: ignore[method-assign]


_UNHANDLED = object()


def _light(annotation: Any, info: Any, value: Any) -> Any:
    """The coerced value, or _UNHANDLED for typer to coerce."""
    inner = _without_none(annotation)
    if get_origin(inner) is list:
        [item_type] = get_args(inner) or (Any,)
        if not isinstance(value, (list, tuple)):
            value = [value]
        items = [_leaf(item_type, info, item) for item in value]
        return _UNHANDLED if any(item is _UNHANDLED for item in items) else items
    return _leaf(inner, info, value)


def _leaf(annotation: Any, info: Any, value: Any) -> Any:
    if getattr(info, "parser", None) is not None:
        try:
            return info.parser(value)  # what typer's adapter returns; a BadParameter propagates as it does there
        except (ValueError, AssertionError):
            return _UNHANDLED  # typer words these as a validation error: its own path says it
    if annotation is str and isinstance(value, str) and getattr(info, "click_type", None) is None:
        return value
    return _UNHANDLED


def _without_none(annotation: Any) -> Any:
    """`X | None` and `Optional[X]` as X; anything else unchanged."""
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation
