"""Kernel tables shaped as later releases ship them, made from a real one.

The tables of flashinfer 0.6.18 on live only in NVIDIA's artifact store; the
ports of those releases are tested on flashinfer-cubin 0.6.13's rows (real
kernels, real traits) with the fields later tables added appended to the struct
and to every row: false, except on the kernels a case names."""

from __future__ import annotations

import re
import zipfile
from collections.abc import Callable
from pathlib import Path

from hprobe.compiled.table import KernelTable, parse_table
from hprobe.compiled.trtllm_gen import Port, port_for
from hprobe.compiled.trtllm_gen.era_0_6_12 import Device, Selection
from hprobe.support.kernel_package import package_of
from hprobe.support.trees import resolve

ADDED_0_6_18 = ("mEnablesBf16QFp8KvKOnlyTransform", "mSeparateTransformedKv", "mFp16Softmax", "mUsesSpcompress")
ADDED_0_7_0 = (*ADDED_0_6_18, "mFusesDsv4InvRopeFp8Quant", "mUsesDsv4Ue8m0ScaleO")


def header_of(cubin_wheel: Path, flashinfer: Path) -> str:
    """The table the release at `flashinfer` names, out of a flashinfer-cubin wheel."""
    package = package_of(flashinfer)
    assert not isinstance(package, str), package
    with zipfile.ZipFile(cubin_wheel) as archive:
        return archive.read(f"flashinfer_cubin/cubins/{package.path}include/flashInferMetaInfo.h").decode()


def later_table(header: str, added: tuple[str, ...], true_on: dict[str, tuple[str, ...]] | None = None) -> KernelTable:
    """`header`'s rows with the `added` fields (false, or true on the kernels `true_on` names per field)."""
    true_on = true_on or {}
    header = header.replace(
        "    const char* sha256;\n", "".join(f"    bool {name};\n" for name in added) + "    const char* sha256;\n", 1
    )

    def row(match: re.Match[str]) -> str:
        line = match.group(0)
        values = ", ".join(
            "true" if any(f'"{kernel}"' in line for kernel in true_on.get(name, ())) else "false" for name in added
        )
        return re.sub(r', ("[0-9a-f]{64}")\}', f", {values}, \\1}}", line)

    text = re.sub(r"^\{ DATA_TYPE.*\},?$", row, header, flags=re.M)
    return parse_table(text.encode(), f"0.6.13's rows with {', '.join(added)}")


def selections_on(table: KernelTable, eras: dict[str, str], device: Device) -> Callable[[str], Selection]:
    """Each release's selection (`eras`: release -> the era its port must be) on `table`."""

    def at(version: str) -> Selection:
        port = port_for(resolve(version).location / "flashinfer")
        assert isinstance(port, Port) and port.era == eras[version], port
        return port.selection(table, device)

    return at


def table_0_7(cubin_wheel: Path) -> KernelTable:
    """A 0.7.x-shaped table: 0.6.13's rows with the six fields 0.7.0's hash reads."""
    return later_table(header_of(cubin_wheel, resolve("0.6.13").location / "flashinfer"), ADDED_0_7_0)


B200 = Device(sm=100, multiprocessor_count=148, max_shared_memory_per_block_optin=227 * 1024)
ERAS_0_7 = {"0.7.0": "0.7.0 – 0.7.0.post1", "0.7.2": "0.7.1 – 0.7.2", "0.7.2.post1": "0.7.2.post1"}


def selections_0_7(cubin_wheel: Path) -> Callable[[str], Selection]:
    """The 0.7.0, 0.7.2 and 0.7.2.post1 selections on a B200, over the 0.7.x-shaped table."""
    return selections_on(table_0_7(cubin_wheel), ERAS_0_7, B200)
