"""compiled/cutlass_prefill: which era of the SM10x cutlass prefill run reads
like a release (by the digests of its head-dim dispatch, the context macro and
the run), and the run's dispatch over the head dims it is handed, on cases
derived from that C++: the pairs its `DISPATCH_head_dim` names, refused with
the release's words from 0.6.12, dispatching nothing before."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from hprobe.compiled.cutlass_prefill import (
    CONTEXT,
    DISPATCH,
    ERAS,
    RUN_FILE,
    Era,
    Refusal,
    RunCall,
    check,
    parse_call,
    port_for,
)
from hprobe.compiled.files import CUTLASS_PREFILL_READ, data_dir

from ..conftest import installed_flashinfer


def _dispatched_pairs(package: Path) -> set[tuple[int, int]]:
    """The pairs the release's DISPATCH_head_dim names, read here from its
    text: `if (head_dim_qk == A && head_dim_vo == B)` branches."""
    text = (data_dir(package) / RUN_FILE).read_text()
    start = text.index(f"#define {DISPATCH}(")
    macro = text[start : text.index("#define", start + 1)]
    return {(int(a), int(b)) for a, b in re.findall(r"head_dim_qk == (\d+) && head_dim_vo == (\d+)", macro)}


def _refusal_words(package: Path) -> str | None:
    """What the release's DISPATCH_context says of a pair it did not dispatch, or None (it says nothing)."""
    text = (data_dir(package) / RUN_FILE).read_text()
    start = text.index(f"#define {CONTEXT}(")
    macro = text[start : text.index("using namespace", start)]
    said = re.search(r'<< "([^"]*)"', macro)
    return said.group(1) if said else None


def _era(releases: str) -> Era:
    return next(e for e in ERAS if e.releases == releases)


@pytest.mark.pure
def test_a_run_reads_back_as_the_head_dims_its_era_takes():
    # As device/boundary.launch_shape writes the run's arguments (0.6.14's probe call, 12 q / 4 kv heads).
    sizes = (
        "33554432;128,12,192;128,4,192;128,4,128;2;2;149;131072;131072;131072;128,12,128;-;1;0.07;1.0;1.0;1.0;1.0;128"
    )
    assert parse_call(sizes, _era("0.6.12 – 0.7.4")) == RunCall(192, 128)
    # Before 0.6.0 the run takes the head dims as integers, after the heads.
    ints = "33554432;128,12,192;128,4,192;128,4,128;2;2;149;131072;131072;131072;128,12,128;-;1;0.07;12;4;192;128;128"
    assert parse_call(ints, _era("0.5.0 – 0.5.3")) == RunCall(192, 128)
    with pytest.raises(ValueError):
        parse_call("33554432;128,12,192", _era("0.6.12 – 0.7.4"))


@pytest.mark.pure
def test_a_pair_the_dispatch_does_not_name_is_refused_loudly_from_0_6_12_and_silently_before():
    new, old = _era("0.6.12 – 0.7.4"), _era("0.6.0 – 0.6.11.post3")
    check(new, RunCall(192, 128))
    with pytest.raises(Refusal) as loud:
        check(new, RunCall(256, 256))
    assert loud.value.message == "Unsupported head dimensions: head_dim_qk=256, head_dim_vo=256"
    assert loud.value.definition == CONTEXT
    with pytest.raises(Refusal) as silent:
        check(old, RunCall(128, 64))
    assert "dispatches nothing and returns without an error" in silent.value.message
    assert silent.value.definition == DISPATCH


def test_the_installed_release_reads_like_its_era_and_an_edited_copy_like_none(tmp_path):
    found = port_for(installed_flashinfer())
    assert isinstance(found, Era) and found.releases == "0.6.12 – 0.7.4"
    assert found.pairs == _dispatched_pairs(installed_flashinfer())
    assert found.refuses and _refusal_words(installed_flashinfer()) == "Unsupported head dimensions: head_dim_qk="
    copy = tmp_path / "flashinfer"
    for relative in CUTLASS_PREFILL_READ:
        (data_dir(copy) / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(data_dir(installed_flashinfer()) / relative, data_dir(copy) / relative)
    run = data_dir(copy) / RUN_FILE
    # A pair added to the dispatch: the port no longer describes the release.
    run.write_text(
        run.read_text().replace("head_dim_qk == 64 && head_dim_vo == 64", "head_dim_qk == 96 && head_dim_vo == 96")
    )
    changed = port_for(copy)
    assert isinstance(changed, str) and f"fmha_cutlass_sm100.cu {DISPATCH}" in changed


@pytest.mark.slow
@pytest.mark.parametrize(
    ("release", "era"), [("0.5.3", "0.5.0 – 0.5.3"), ("0.6.10", "0.6.0 – 0.6.11.post3"), ("0.7.4", "0.6.12 – 0.7.4")]
)
def test_each_era_takes_the_pairs_its_release_s_dispatch_names(release, era):
    from hprobe.support.trees import resolve

    package = resolve(release).tree / "flashinfer"
    found = port_for(package)
    assert isinstance(found, Era) and found.releases == era, found
    assert found.pairs == _dispatched_pairs(package)
    # Refusing is the context macro's own: words where the release has them, none where it has not.
    assert found.refuses == (_refusal_words(package) is not None)
