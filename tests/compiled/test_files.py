"""compiled/files: the C++ files each port reads, listed where a warm run can
key its kept conclusions without importing the ports; each list must be the
files the port itself names."""

from __future__ import annotations

import pytest

from hprobe.compiled import files
from hprobe.compiled.files import CUTLASS_PREFILL_READ, DECODE_PLAN_READ, ENTRY_READ, data_dir


def test_a_kept_conclusion_is_keyed_on_every_file_a_port_reads():
    """A warm run keys kept conclusions on compiled/files.py's list without
    importing the ports: it must be the files their fingerprints name."""
    from hprobe.compiled.trtllm_gen import read_files

    assert files.READ == read_files()


@pytest.mark.pure
def test_the_decode_plan_files_the_ports_read_are_the_ones_kept_for_them():
    from hprobe.compiled.gqa_decode import read_files

    assert read_files() == tuple(sorted(DECODE_PLAN_READ))


@pytest.mark.pure
def test_the_cutlass_prefill_files_the_port_reads_are_the_ones_kept_for_it():
    from hprobe.compiled.cutlass_prefill import read_files

    assert read_files() == tuple(sorted(CUTLASS_PREFILL_READ))


@pytest.mark.pure
def test_the_sm12x_entry_files_the_ports_read_are_the_ones_kept_for_them():
    from hprobe.compiled.sm120_sparse import read_files

    assert read_files() == tuple(sorted(ENTRY_READ))


@pytest.mark.pure
def test_a_releases_cxx_is_under_its_data_folder(tmp_path):
    assert data_dir(tmp_path / "flashinfer") == tmp_path / "flashinfer" / "data"
    # Every path is relative to it, as the wheel lays it out.
    every = files.READ + ENTRY_READ + DECODE_PLAN_READ + CUTLASS_PREFILL_READ
    assert all(not p.startswith("/") and p.split("/")[0] in ("include", "csrc") for p in every)
