"""compiled/gqa_decode: which era of the CUDA-core decode plan reads like a
release (by the digest of the plan and of its group dispatch macro), and the
plan's checks in its own order, on cases derived from that C++."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from hprobe.compiled.cxx import SourceFile
from hprobe.compiled.files import DECODE_PLAN_READ, data_dir
from hprobe.compiled.gqa_decode import (
    DISPATCH,
    DISPATCH_FILE,
    ERAS,
    HEAD_DIMS_DIFFER,
    Era,
    PlanCall,
    Refusal,
    check,
    parse_call,
    port_for,
)

from ..conftest import installed_flashinfer


def _dispatched_groups(package: Path) -> set[int]:
    """The groups the release's DISPATCH_GQA_GROUP_SIZE names, read here from
    its text: `if (group_size == N)` branches up to the `else` that raises."""
    text = (data_dir(package) / DISPATCH_FILE).read_text()
    start = text.index(f"#define {DISPATCH}(")
    macro = text[start : text.index("Unsupported group_size", start)]
    return {int(n) for n in re.findall(r"group_size == (\d+)\)", macro)}


def _era(releases: str) -> Era:
    return next(e for e in ERAS if e.releases == releases)


@pytest.mark.pure
def test_a_function_like_macro_is_a_definition_and_a_use_of_it_is_not(tmp_path):
    text = (
        "#include <x>\n"
        "#define PICK(n, N, ...) \\\n"
        "  if (n == 1) {          \\\n"
        "    __VA_ARGS__          \\\n"
        "  } else {               \\\n"
        '    throw "no";          \\\n'
        "  }\n"
        "\n"
        "void f(int n) {\n"
        "  PICK(n, N, { g<N>(); });\n"
        "}\n"
    )
    file = SourceFile(tmp_path / "a.cuh", text)
    [macro] = file.definitions("PICK")
    assert macro.line == 2 and macro.text.splitlines()[-1].strip() == "}"
    assert "void f" not in macro.text
    edited = SourceFile(tmp_path / "b.cuh", text.replace("n == 1", "n == 2"))
    assert file.digest("PICK") != edited.digest("PICK")
    assert [d.name for d in file.definitions("f")] == ["f"]


@pytest.mark.pure
def test_a_recorded_plan_reads_back_as_its_head_counts_and_dims():
    # As device/boundary.launch_shape writes the plan's 15 arguments (0.6.14's probe call).
    call = parse_call("134217728;8388608;8388608;2;1;12;8;16;False;-1;0.0;128;128;0;0")
    assert call == PlanCall(num_qo_heads=12, num_kv_heads=8, head_dim_qk=128, head_dim_vo=128)
    with pytest.raises(ValueError):
        parse_call("134217728;8388608")


@pytest.mark.pure
def test_the_plan_checks_in_its_own_order_and_divides_as_cpp_does():
    """batch_decode.cu: TVM_FFI_ICHECK_EQ(head_dim_qk, head_dim_vo) before
    DISPATCH_GQA_GROUP_SIZE(num_qo_heads / num_kv_heads, ...): int64 division."""
    old, new = _era("0.5.0 – 0.6.17"), _era("0.7.1 – 0.7.4")
    with pytest.raises(Refusal) as differs:
        check(old, PlanCall(5, 1, 192, 128))  # group 5 too, but the head dims are checked first
    assert differs.value.message == HEAD_DIMS_DIFFER
    with pytest.raises(Refusal) as five:
        check(old, PlanCall(5, 1, 128, 128))
    assert five.value.message == "Unsupported group_size: 5" and five.value.file == DISPATCH_FILE
    assert check(old, PlanCall(12, 8, 128, 128)) == 1  # 12 / 8 is 1 in C++: no check sees the rest
    assert check(new, PlanCall(16, 1, 128, 128)) == 16
    with pytest.raises(Refusal, match="Unsupported group_size: 16"):
        check(old, PlanCall(64, 4, 128, 128))
    with pytest.raises(Refusal, match="Unsupported group_size: 0"):
        check(new, PlanCall(4, 8, 128, 128))


def test_the_installed_release_reads_like_its_era_and_an_edited_copy_like_none(tmp_path):
    found = port_for(installed_flashinfer())
    assert isinstance(found, Era) and found.releases == "0.5.0 – 0.6.17"
    assert found.group_sizes == _dispatched_groups(installed_flashinfer())
    copy = tmp_path / "flashinfer"
    for relative in DECODE_PLAN_READ:
        (data_dir(copy) / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(data_dir(installed_flashinfer()) / relative, data_dir(copy) / relative)
    utils = data_dir(copy) / DISPATCH_FILE
    # A group added to the dispatch: the port no longer describes the release.
    utils.write_text(utils.read_text().replace("group_size == 8)", "group_size == 5)", 1))
    changed = port_for(copy)
    assert isinstance(changed, str) and "utils.cuh DISPATCH_GQA_GROUP_SIZE" in changed


@pytest.mark.slow
@pytest.mark.parametrize("release", ["0.6.18", "0.7.4"])
def test_each_era_takes_the_groups_its_release_s_dispatch_names(release):
    from hprobe.support.trees import resolve

    package = resolve(release).tree / "flashinfer"
    era = port_for(package)
    assert isinstance(era, Era), era
    assert era.group_sizes == _dispatched_groups(package)
