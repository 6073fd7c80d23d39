"""trtllm-gen's kernel table: `flashInferMetaInfo.h`, one C initializer per cubin.

The field order is read from the header's own `struct TllmGenFmhaKernelMetaInfo`, so a
release that adds or moves a field is read by name, not by position; a table that lacks
a field the selection reads is refused, never guessed.
"""

from __future__ import annotations

import functools
import hashlib
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import overload

# The struct's fields the selection reads, by their C names.
_FIELDS = {
    "mDataTypeQ": "dtype_q",
    "mDataTypeO": "dtype_o",
    "mTileSizeQ": "tile_size_q",
    "mTileSizeKv": "tile_size_kv",
    "mStepQ": "step_q",
    "mStepKv": "step_kv",
    "mHeadDimPerCtaV": "head_dim_per_cta_v",
    "mHeadDimQk": "head_dim_qk",
    "mHeadDimV": "head_dim_v",
    "mSM": "sm",
    "mFuncName": "name",
    "mSharedMemBytes": "shared_mem_bytes",
    "mQkvLayout": "qkv_layout",
    "mNumTokensPerPage": "num_tokens_per_page",
    "mMaskType": "mask_type",
    "mKernelType": "kernel_type",
    "mTileScheduler": "tile_scheduler",
    "mMultiCtasKvMode": "multi_ctas_kv_mode",
    "mGroupsHeadsQ": "groups_heads_q",
    "mGroupsTokensHeadsQ": "groups_tokens_heads_q",
    "mReuseSmemKForV": "reuse_smem_k_for_v",
    "m2CtaMma": "uses_2cta_mma",
    "mSkipsSoftmaxWhenPossible": "skips_softmax",
}
# Present only in tables that build SageAttention kernels; absent means 0 (none).
_SAGE = ("mNumEltsPerSageAttnBlkQ", "mNumEltsPerSageAttnBlkK", "mNumEltsPerSageAttnBlkP", "mNumEltsPerSageAttnBlkV")
# Fields not every kernel package has, read where present: None where a table has
# no such field. A port that reads one refuses a table without it
# (Selection.TABLE_FIELDS); ports that do not read it never look.
LATER_FIELDS = {
    # One K/V dtype up to 0.6.10's tables; from 0.6.11's, K and V each (beside it).
    "mDataTypeKv": "dtype_kv",
    "mDataTypeK": "dtype_k",
    "mDataTypeV": "dtype_v",
    # Sparse MLA as a flag up to 0.6.8's tables; as a kind from 0.6.10's.
    "mSparseMla": "sparse_mla",
    "mSparseAttn": "sparse_attn",
    "mEnablesBf16QFp8KvKOnlyTransform": "enables_bf16q_fp8kv_k_only_transform",  # 0.6.18
    "mSeparateTransformedKv": "separate_transformed_kv",  # 0.6.18
    "mFp16Softmax": "fp16_softmax",  # 0.6.18
    "mUsesSpcompress": "uses_spcompress",  # 0.6.18
    "mFusesDsv4InvRopeFp8Quant": "fuses_dsv4_inv_rope_fp8_quant",  # 0.7.0
    "mUsesDsv4Ue8m0ScaleO": "uses_dsv4_ue8m0_scale_o",  # 0.7.0
}


class TableError(ValueError):
    """The file is not a kernel table this module can read."""


@dataclass(frozen=True)
class KernelMeta:
    """One row: a cubin and the traits the selection hashes and reads."""

    dtype_q: str
    dtype_o: str
    tile_size_q: int
    tile_size_kv: int
    step_q: int
    step_kv: int
    head_dim_per_cta_v: int
    head_dim_qk: int
    head_dim_v: int
    sm: str  # the SM constant's name: kSM_100f (the family build), kSM_100, kSM_103
    name: str
    shared_mem_bytes: int
    qkv_layout: int
    num_tokens_per_page: int
    mask_type: int
    kernel_type: int
    tile_scheduler: int
    multi_ctas_kv_mode: int
    groups_heads_q: bool
    groups_tokens_heads_q: bool
    reuse_smem_k_for_v: bool
    uses_2cta_mma: bool
    skips_softmax: bool
    sage_blocks: tuple[int, int, int, int] = (0, 0, 0, 0)
    dtype_kv: str | None = None
    dtype_k: str | None = None
    dtype_v: str | None = None
    sparse_attn: int | None = None  # 0 dense, 1 DSv3.2-style top-k, 2 DSv4 (0.6.10's tables on)
    sparse_mla: bool | None = None  # up to 0.6.8's tables: sparse or not
    enables_bf16q_fp8kv_k_only_transform: bool | None = None
    separate_transformed_kv: bool | None = None
    fp16_softmax: bool | None = None
    uses_spcompress: bool | None = None
    fuses_dsv4_inv_rope_fp8_quant: bool | None = None
    uses_dsv4_ue8m0_scale_o: bool | None = None


class RowsOnDemand(Sequence[KernelMeta]):
    """A table's rows, read at the first look inside: a table handed over by
    another process that worked out its answers (support/deep_ahead.py) is
    often never read here, and 13,000 rows cost a tenth of a second to take
    in. Its length is known without them; rows read back that are not as many
    are a TableError."""

    def __init__(self, length: int, read: Callable[[], Sequence[KernelMeta]]):
        self.length = length
        self._read = read
        self._lock = threading.Lock()
        self._rows: Sequence[KernelMeta] | None = None

    def __len__(self) -> int:
        return self.length

    @overload
    def __getitem__(self, index: int) -> KernelMeta: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[KernelMeta]: ...
    def __getitem__(self, index: int | slice) -> KernelMeta | Sequence[KernelMeta]:
        return self._loaded()[index]

    def __iter__(self) -> Iterator[KernelMeta]:
        return iter(self._loaded())

    def _loaded(self) -> Sequence[KernelMeta]:
        with self._lock:
            if self._rows is None:
                rows = self._read()
                if len(rows) != self.length:
                    raise TableError(f"the table's rows read again are {len(rows)}, not {self.length}")
                self._rows = rows
            return self._rows


@dataclass(frozen=True)
class KernelTable:
    """Every row of one table, with the sha256 of the file it was read from."""

    rows: Sequence[KernelMeta]  # a tuple, or RowsOnDemand
    sha256: str
    origin: str  # where it came from, in words (a path, a package, a URL)
    data: bytes = field(default=b"", repr=False, compare=False)  # the file as read
    checksums: bytes = field(default=b"", repr=False, compare=False)  # the checksums.txt that vouched for it

    def __len__(self) -> int:
        return len(self.rows)


_STRUCT = re.compile(r"struct\s+TllmGenFmhaKernelMetaInfo\s*\{(?P<body>.*?)\};", re.S)
_MEMBER = re.compile(r"([A-Za-z_][\w\s\*]*?)\s*\b(\w+)\s*;")
_ROW = re.compile(r"^\s*\{(?P<row>.*)\}\s*,?\s*$")
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[^,\s][^,]*')


def read_table(path: Path, origin: str | None = None) -> KernelTable:
    """Read a `flashInferMetaInfo.h` (TableError when it is not one)."""
    data = path.read_bytes()
    return parse_table(data, origin or str(path))


def parse_table(data: bytes, origin: str, checksums: bytes = b"") -> KernelTable:
    text = data.decode("utf-8", errors="replace")
    struct = _STRUCT.search(text)
    if struct is None:
        raise TableError(f"{origin}: no struct TllmGenFmhaKernelMetaInfo")
    members = [m.group(2) for m in _MEMBER.finditer(struct.group("body"))]
    missing = [name for name in _FIELDS if name not in members]
    if missing:
        raise TableError(f"{origin}: the struct has no {', '.join(missing)}")
    position = {name: i for i, name in enumerate(members)}
    rows: list[KernelMeta] = []
    array = text.find("sTllmGenFmhaKernelMetaInfos[]", struct.end())
    if array < 0:
        raise TableError(f"{origin}: no sTllmGenFmhaKernelMetaInfos array")
    for line in text[array:].splitlines()[1:]:
        match = _ROW.match(line)
        if match is None:
            if line.strip().startswith("};"):
                break
            continue
        values = [t.strip() for t in _TOKEN.findall(match.group("row"))]
        if len(values) != len(members):
            raise TableError(f"{origin}: a row of {len(values)} values for a struct of {len(members)} fields")
        fields = {attr: _value(values[position[c]]) for c, attr in _FIELDS.items()}
        sage = tuple(int(_value(values[position[c]])) if c in position else 0 for c in _SAGE)
        later = {attr: _value(values[position[c]]) for c, attr in LATER_FIELDS.items() if c in position}
        rows.append(KernelMeta(**fields, sage_blocks=sage, **later))  # type: ignore[arg-type]
    if not rows:
        raise TableError(f"{origin}: the table has no rows")
    return KernelTable(tuple(rows), hashlib.sha256(data).hexdigest(), origin, data, checksums)


# A row as plain values, in KernelMeta's field order: how a parsed table is kept
# between runs (parsing the 5.5 MB header takes about 0.6 s, reading this back 0.1 s).
ROW_FIELDS = tuple(f.name for f in fields(KernelMeta))
_PLAIN = {str, int, bool, type(None), tuple}  # the types a row's values have (sage_blocks: a tuple)


@functools.cache
def parser_digest() -> str:
    """This module's source, by content: what a parse's rows rest on besides the file."""
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()


def plain_rows(table: KernelTable) -> list[list[object]]:
    """Each row's values, in ROW_FIELDS order (sage_blocks as a list)."""
    return [
        [list(v) if isinstance(v, tuple) else v for v in (getattr(row, f) for f in ROW_FIELDS)] for row in table.rows
    ]


def rows_from_plain(names: object, values: object) -> tuple[KernelMeta, ...] | None:
    """`plain_rows` read back; None for anything that is not exactly such a list
    under the same field names (an entry from other code is parsed afresh)."""
    if names != list(ROW_FIELDS) or not isinstance(values, list) or not values:
        return None
    sage = ROW_FIELDS.index("sage_blocks")
    rows = []
    new = object.__new__
    for row in values:
        if not isinstance(row, list) or len(row) != len(ROW_FIELDS):
            return None
        blocks = row[sage]
        if not isinstance(blocks, list) or len(blocks) != 4 or not all(type(b) is int for b in blocks):
            return None
        row[sage] = tuple(blocks)
        if not set(map(type, row)) <= _PLAIN:
            return None
        # Set as unpickling sets a frozen dataclass's fields: the values are a
        # parse's own, checked above for their shape; __init__ would cost as much
        # as the parse saved.
        meta = new(KernelMeta)
        meta.__dict__.update(zip(ROW_FIELDS, row, strict=True))
        rows.append(meta)
    return tuple(rows)


def _value(token: str) -> str | int | bool:
    if token.startswith('"'):
        return token[1:-1]
    if token in ("true", "false"):
        return token == "true"
    try:
        return int(token, 0)
    except ValueError:
        return token  # an enumerator's name: DATA_TYPE_BF16, kSM_100f


@dataclass(frozen=True)
class Tables:
    """The kernel table a release's trtllm-gen selection reads, or why there is none."""

    table: KernelTable | None
    missing: str | None = None  # why no table, in words
    disabled: bool = False  # compiled depth turned off: every answer stays at the validators
