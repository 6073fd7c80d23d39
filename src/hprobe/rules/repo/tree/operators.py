"""Python's comparisons as `ast` names them, for the readings that evaluate
an engine's expressions (the interpreter, an engine setting's tests)."""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from typing import Any

COMPARISONS: dict[type[ast.cmpop], Callable[[Any, Any], bool]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
}
