"""compiled/trtllm_gen: which era's port describes a release, and how it selects
GQA/MHA kernels, read from the C++ it ships; the runner's architecture check.
On the installed release (0.6.14) and copies of its C++ with one function
edited: a release is evaluated with a port only where every function the port
follows reads as it did."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

from hprobe.compiled import files
from hprobe.compiled.trtllm_gen import (
    Gate,
    Port,
    adopt,
    known,
    port_for,
    read_files,
    runner_gate,
)
from hprobe.compiled.trtllm_gen.era_0_6_12 import GQA_VARIANTS, GqaVariant

_SPEC = importlib.util.find_spec("flashinfer")
PACKAGE = Path(next(iter(_SPEC.submodule_search_locations)))  # type: ignore[union-attr]


def _copy(tmp_path: Path, edit: tuple[str, str, str] | None = None) -> Path:
    """The installed release's C++ that the ports read, under tmp_path/flashinfer/data,
    with `edit` (file, old, new) applied once."""
    package = tmp_path / "flashinfer"
    for relative in read_files():
        source = PACKAGE / "data" / relative
        if source.is_file():
            (package / "data" / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source, package / "data" / relative)
    if edit is not None:
        relative, old, new = edit
        path = package / "data" / relative
        text = path.read_text()
        assert text.count(old) == 1, old
        path.write_text(text.replace(old, new))
    return package


def test_the_installed_release_is_in_the_first_era_and_its_runner_takes_sm100_and_sm103():
    port = port_for(PACKAGE)
    assert isinstance(port, Port) and port.era == "0.6.12 – 0.6.15.post1"
    assert port.gqa == GQA_VARIANTS[0] and port.key == "0.6.12 – 0.6.15.post1, GQA/MHA as 0.6.14 – 0.6.15.post1"
    gate = runner_gate(PACKAGE)
    assert isinstance(gate, Gate) and gate.sms == (100, 103)
    assert gate.location.endswith("fmhaRunner.cuh:37")


def test_a_copy_reads_as_the_release_it_was_copied_from(tmp_path):
    port = port_for(_copy(tmp_path))
    assert isinstance(port, Port) and port.era == "0.6.12 – 0.6.15.post1" and port.gqa == GQA_VARIANTS[0]


def test_a_gqa_selector_read_otherwise_leaves_the_mla_port_and_says_why_gqa_has_none(tmp_path):
    """selectGqGenerationKernel is no function the MLA port follows: the era
    stays, its GQA/MHA answers do not (pending, with this reason)."""
    edited = _copy(
        tmp_path,
        (
            files.KERNELS,
            "int numTokensHeadsQ = params.mNumHeadsQPerKv * params.mMaxSeqLenQ;",
            "int numTokensHeadsQ = params.mNumHeadsQPerKv;",
        ),
    )
    port = port_for(edited)
    assert isinstance(port, Port) and port.era == "0.6.12 – 0.6.15.post1"
    assert port.gqa == (
        "trtllm-gen's GQA/MHA selection (selectGqGenerationKernel) reads differently from every ported release of "
        "the 0.6.12 – 0.6.15.post1 era"
    )
    assert port.key == port.era  # its answers are not kept beside the release's own


def test_a_selection_function_read_otherwise_has_no_port_and_is_named(tmp_path):
    edited = _copy(tmp_path, (files.KERNELS, "Sliding window attention and chunked attention should not", "Windows"))
    port = port_for(edited)
    assert isinstance(port, str) and "fmhaKernels.cuh selectKernel" in port
    assert port.startswith("its trtllm-gen selection code has no port in hprobe yet (")


def test_a_runner_check_read_otherwise_or_missing_is_said(tmp_path):
    edited = _copy(tmp_path / "a", (files.RUNNER, "kSM_103", "kSM_110"))
    gate = runner_gate(edited)
    assert isinstance(gate, str) and gate.startswith("TllmGenFmhaRunner in ") and "(digest " in gate
    without = _copy(tmp_path / "b")
    (without / "data" / files.RUNNER).unlink()
    assert runner_gate(without) == f"{files.RUNNER} is not in this release"


def test_what_another_process_read_is_adopted_without_reading(tmp_path):
    """A child hands over the gate and port it read (known); the parent takes them
    for that package, though nothing is there to read."""
    gate, port = known(PACKAGE)
    nowhere = tmp_path / "nowhere" / "flashinfer"
    adopt(nowhere, gate, port)
    assert runner_gate(nowhere) == gate and port_for(nowhere) == port


def test_a_note_names_the_gqa_releases_only_where_they_are_not_the_eras():
    installed = port_for(PACKAGE)
    assert isinstance(installed, Port) and installed.described == installed.key
    whole = Port("0.6.10 – 0.6.10.post1", installed.selection, GqaVariant("0.6.10 – 0.6.10.post1", {}, False))
    assert whole.described == "0.6.10 – 0.6.10.post1" and whole.key != whole.described
    assert Port("an era", installed.selection, "no port").described == "an era"
