"""An engine-shaped tree of one module, made here for the head-count trail's
tests: the package `engine`, its module `attn`, and the line of its call."""

from __future__ import annotations

import textwrap
from pathlib import Path

from hprobe.rules.repo.tree.scan import RepoIndex


def one_module_tree(tmp_path: Path, text: str) -> tuple[RepoIndex, int]:
    """`text` as engine/attn.py under `tmp_path`, indexed; with the line of its
    FlashInfer call (the first that is not an import)."""
    package = tmp_path / "engine"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "attn.py").write_text(textwrap.dedent(text))
    index = RepoIndex.build(tmp_path)
    assert index.by_suffix("engine.attn") is not None
    line = next(
        i
        for i, row in enumerate(text.splitlines(), 1)
        if "trtllm_batch_decode_with_kv_cache_mla(" in row and "import" not in row
    )
    return index, line
