"""Whether a flashinfer tree defines an entry point, read from source without importing it."""

from __future__ import annotations

import re
from pathlib import Path

from ..envinfo import flashinfer_origin


def entry_point_present(dotted: str, root: str | None = None) -> bool | None:
    """True/False for the flashinfer package at `root` (default: the installed one);
    None when there is no flashinfer to look at."""
    root = root or flashinfer_origin()
    if root is None:
        return None
    module, _, name = dotted.rpartition(".")
    parts = module.split(".")[1:]  # drop the leading "flashinfer"
    base = Path(root).joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            text = candidate.read_text(encoding="utf-8", errors="replace")
            pattern = rf"^(?:async\s+)?def\s+{re.escape(name)}\b|^{re.escape(name)}\s*="
            return re.search(pattern, text, re.MULTILINE) is not None
    return False
