"""A serving engine's own source as its wheel ships it: downloaded with pip
(bounded in time), only `.py` files and METADATA unpacked, never imported.
Shared by the tests (conftest.engine_source) and bench/bench_cli.py; no side
effects on import."""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from pathlib import Path

from hprobe.support.trees import download_command


def pip_download(where: Path, spec: str, timeout: float = 600) -> None:
    """One wheel into `where`, as hprobe downloads one (trees.download_command), bounded."""
    where.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        download_command(where, spec), check=True, capture_output=True, stdin=subprocess.DEVNULL, timeout=timeout
    )


# vLLM 0.25.0's CUDA pins, as its wheel's METADATA records them.
VLLM_025_PINS = "flashinfer-python==0.6.13\nflashinfer-cubin==0.6.13\n"


def download_engine(where: Path, distribution: str, version: str) -> Path:
    """The directory holding the package and its `.dist-info`, under `where`."""
    pip_download(where, f"{distribution}=={version}")
    wheel = next(where.glob(f"{distribution}-*.whl"))
    tree = where / "tree"
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            if name.endswith(".py") or name.endswith(".dist-info/METADATA"):
                z.extract(name, tree)
    wheel.unlink()
    return tree


def as_checkout(tree: Path, dest: Path, pins: str = VLLM_025_PINS) -> Path:
    """An engine's package laid out as a checkout at `dest`, its CUDA pins in
    requirements/cuda.txt."""
    package = next(p for p in tree.iterdir() if p.is_dir() and not p.name.endswith(".dist-info"))
    shutil.copytree(package, dest / package.name)
    (dest / "requirements").mkdir()
    (dest / "requirements" / "cuda.txt").write_text(pins)
    return dest
