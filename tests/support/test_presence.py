"""support/presence: whether a flashinfer tree defines an entry point, read
with `ast` (never imported) from a folder or a wheel alike: a name counts
where the module defines, assigns or re-exports it, a star import of a
sibling module included; a private name is not re-exported by a star."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from hprobe.support.presence import entry_point_in_wheel, entry_point_present

pytestmark = pytest.mark.pure

TREE = {
    "flashinfer/__init__.py": "from .decode import single_decode\nfrom .mla import *\n",
    "flashinfer/decode.py": (
        "def single_decode():\n    pass\n\nclass BatchDecodeWrapper:\n    pass\n\n"
        "trtllm_alias = single_decode\nlimit: int = 3\n"
        "try:\n    from ._opt import fast_path\nexcept ImportError:\n    fast_path = None\n"
    ),
    "flashinfer/mla/__init__.py": "from ._core import *\n",
    "flashinfer/mla/_core.py": "def trtllm_batch_decode_with_kv_cache_mla():\n    pass\n\ndef _private():\n    pass\n",
    "flashinfer/broken.py": "def (:\n",
}


def _tree(root: Path) -> Path:
    for name, text in TREE.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root / "flashinfer"


@pytest.mark.parametrize(
    ("dotted", "present"),
    [
        ("flashinfer.decode.single_decode", True),
        ("flashinfer.decode.BatchDecodeWrapper", True),
        ("flashinfer.decode.trtllm_alias", True),  # an assignment
        ("flashinfer.decode.limit", True),  # an annotated one
        ("flashinfer.decode.fast_path", True),  # an optional import
        ("flashinfer.single_decode", True),  # re-exported by the package
        ("flashinfer.mla.trtllm_batch_decode_with_kv_cache_mla", True),  # through `from ._core import *`
        ("flashinfer.trtllm_batch_decode_with_kv_cache_mla", True),  # two stars deep
        ("flashinfer.mla._private", False),  # a star brings no private name
        ("flashinfer.decode.BatchPrefillWrapper", False),
        ("flashinfer.nonexistent.thing", False),
        ("flashinfer.broken.anything", False),  # a module that does not parse defines nothing
    ],
)
def test_an_entry_point_is_found_as_python_would_import_it(tmp_path: Path, dotted, present) -> None:
    package = _tree(tmp_path / "tree")
    assert entry_point_present(dotted, str(package)) is present
    wheel = tmp_path / "flashinfer_python-0.0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, text in TREE.items():
            archive.writestr(name, text)
    assert entry_point_in_wheel(dotted, wheel) is present
