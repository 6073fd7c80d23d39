"""kernels/ragged_prefill: the ragged prefill wrapper on real releases, each
answer checked against the release's own cutlass run (its head-dim dispatch
and what it says of a pair it does not name, read here from its source, not
from hprobe's port)."""

from __future__ import annotations

import re

import pytest

from hprobe.compiled.files import data_dir
from hprobe.support.trees import resolve

RUN_FILE = "csrc/fmha_cutlass_sm100.cu"


def _run_source(release: str) -> tuple[set[tuple[int, int]], int | None]:
    """The (QK, VO) head-dim pairs the release's DISPATCH_head_dim names, and
    the line of DISPATCH_context's refusal (None: it has none)."""
    text = (data_dir(resolve(release).tree / "flashinfer") / RUN_FILE).read_text()
    start = text.index("#define DISPATCH_head_dim(")
    macro = text[start : text.index("#define", start + 1)]
    pairs = {(int(a), int(b)) for a, b in re.findall(r"head_dim_qk == (\d+) && head_dim_vo == (\d+)", macro)}
    said = text.find('"Unsupported head dimensions')
    return pairs, (text.count("\n", 0, said) + 1 if said >= 0 else None)


@pytest.mark.slow
def test_cutlass_takes_the_head_dim_pairs_its_run_dispatches_and_refuses_the_rest(cli_json):
    """SM100, every pair of the probe's axes on 0.6.14 (which refuses) and
    0.6.10 (which dispatches nothing, silently): accepted exactly where the
    release's dispatch names the pair; elsewhere refused at every count, with
    the release's words and line where it has them."""
    kernels = ",".join(
        f"ragged-prefill[head_dim={qk},head_dim_vo={vo}]" for qk in (64, 128, 192, 256) for vo in (64, 128, 256)
    )
    code, doc, err = cli_json("matrix", "-k", kernels, "--sm", "100", "--heads", "1-4", "--flashinfer", "0.6.10,0.6.14")
    assert code in (0, 1), err
    assert len(doc["results"]) == 24
    for result in doc["results"]:
        pairs, line = _run_source(result["flashinfer_version"])
        pair = (result["config"]["head_dim"], result["config"]["head_dim_vo"])
        heads = result["heads"]
        if pair in pairs:
            assert result["accepted"] == [1, 2, 3, 4] and result["depth"] == "dispatch", pair
            assert {h["entry"] for h in heads} == {"get_fmha_module.run"}
            continue
        assert result["accepted"] == [] and all(h["error_type"] == "compiled check" for h in heads), pair
        if line is not None:
            assert {h["message"] for h in heads} == {
                f"Unsupported head dimensions: head_dim_qk={pair[0]}, head_dim_vo={pair[1]}"
            }
            assert {h["location"] for h in heads} == {
                f"flashinfer/data/{RUN_FILE}:{line} (DISPATCH_context, in FMHACutlassSM100Run)"
            }
        else:
            assert all("dispatches nothing and returns without an error" in h["message"] for h in heads)
    assert {r["flashinfer_version"] for r in doc["results"]} == {"0.6.10", "0.6.14"}
    assert _run_source("0.6.10")[1] is None and _run_source("0.6.14")[1] is not None


@pytest.mark.slow
def test_cutlass_is_sm10x_only_and_fa2_runs_everywhere(cli_json):
    """The release's own words on SM90 and SM120 (get_fmha_module), and fa2
    reaching its run there; a count no multiple of the KV heads is pending at
    either backend, never `ok`."""
    code, doc, err = cli_json(
        "matrix",
        "-k",
        "ragged-prefill[kv_heads=2],ragged-prefill[backend=fa2,kv_heads=2]",
        "--sm",
        "90,100,120",
        "--heads",
        "2-4",
    )
    assert code == 0, err
    by = {(r["config"]["backend"], r["sm"]): r for r in doc["results"]}
    for sm in (90, 120):
        assert by["cutlass", sm]["status"] == "unsupported-arch"
        assert {h["message"].split(".")[0] for h in by["cutlass", sm]["heads"]} == {
            "CUTLASS FMHA requires SM100a (B200/GB200) or SM110a"
        }
    for key in [("cutlass", 100), *(("fa2", sm) for sm in (90, 100, 120))]:
        heads = {h["heads"]: h for h in by[key]["heads"]}
        assert by[key]["accepted"] == [2, 3, 4], key
        assert "pending" not in heads[2] and "pending" not in heads[4], key
        assert heads[3]["pending"].startswith("3 query heads over 2 KV heads: no multiple of them"), key
