"""The kernel catalogue against real flashinfer 0.6.14 on CPU: trtllm-mla, xqa-mla,
batch-mla, sm120-sparse-mla, their axes, stated depth and metadata."""

from __future__ import annotations

import pytest

from hprobe.kernels import PROBES, get_variant
from hprobe.kernels.base import Metadata
from hprobe.model.outcome import HeadResult, KernelSMResult, Outcome
from hprobe.model.sm import SM
from hprobe.probe.run import _attach_metadata


def _results(doc: dict) -> dict[tuple[str, int], dict]:
    return {(r["key"], r["sm"]): r for r in doc["results"]}


def test_batch_mla_cutlass_accepts_exactly_128_and_fa2_everything(cli_json):
    code, doc, _ = cli_json("matrix", "-k", "batch-mla", "--backend", "cutlass,fa2", "--sm", "100")
    assert code == 0
    results = _results(doc)
    cutlass = results[("batch-mla[backend=cutlass]", 100)]
    assert cutlass["accepted"] == [128]
    refused = {h["heads"]: h for h in cutlass["heads"] if h["outcome"] == "rejected"}
    assert sorted(refused) == [h for h in range(1, 257) if h != 128]
    assert refused[64]["message"] == "Expected 128 heads for q_nope_pe, got 64"
    assert refused[64]["location"].startswith("flashinfer/mla/_core.py:")
    fa2 = results[("batch-mla[backend=fa2]", 100)]
    assert fa2["accepted"] == list(range(1, 257))
    assert fa2["depth"] == "validators"
    # The compiled plan was let through, not run; the result says so.
    assert any("get_batch_mla_module.plan" in n for n in fa2["notes"])
    assert {h["entry"] for h in fa2["heads"]} == {"get_batch_mla_module.run"}


def test_a_count_python_sends_to_a_kernel_that_refuses_it_is_broken_not_slow(cli_json, write_table):
    table = write_table(
        """
[table]
name = "pads-to-24"
source = "tests"
[model]
name = "Kimi-K3"
num_q_heads = 96
tp = [4]
[[backend]]
name = "sm120 decode"
kernel = "sm120-sparse-mla"
sm = [120]
pad_to = [24, 128]
"""
    )
    # 24 heads, one token: no decode kernel takes 24, and the general paged
    # kernel Python then calls refuses decode-sized calls in its own C++.
    code, doc, _ = cli_json("check", "--table", str(table), "--sm", "120")
    [finding] = doc["findings"]
    assert (finding["n"], finding["padded"], finding["verdict"]) == (24, 24, "broken")
    assert finding["best"] == 32  # the smallest count >= 24 on the decode kernel
    assert finding["evidence"]["message"].startswith("Decode (num_tokens <= 64) must go through")
    assert code == 1


def test_trtllm_mla_sweeps_the_backends_the_release_offers(cli_json):
    code, doc, _ = cli_json("matrix", "-k", "trtllm-mla", "--sm", "100", "--heads", "64,96,128,129")
    assert code == 0
    results = _results(doc)
    keys = {k for k, _ in results}
    assert keys == {
        "trtllm-mla",
        "trtllm-mla[backend=trtllm-gen]",
        "trtllm-mla[backend=cute-dsl]",
        "trtllm-mla[backend=xqa]",
        "trtllm-mla[backend=cake]",
    }
    # cake came in 0.7.4: this release refuses the value itself, said as absent.
    assert {h["outcome"] for h in results[("trtllm-mla[backend=cake]", 100)]["heads"]} == {"absent"}
    gen = results[("trtllm-mla[backend=trtllm-gen]", 100)]
    # Past the validators (which take all four), trtllm-gen's own selection on its
    # kernel table: 129 heads do not divide into CTAs of 64 or 16; 96 only where a
    # short KV per CTA picks the 16-head tile (tests/compiled/test_depth.py works both from the C++).
    assert gen["depth"] == "compiled"
    assert gen["accepted"] == [64, 96, 128]
    by_heads = {h["heads"]: h for h in gen["heads"]}
    assert by_heads[129]["outcome"] == "rejected" and by_heads[129]["error_type"] == "compiled check"
    assert by_heads[96]["shapes"] and not by_heads[64].get("shapes")
    cute = results[("trtllm-mla[backend=cute-dsl]", 100)]
    assert cute["accepted"] == [64, 96, 128]
    refusal = next(h for h in cute["heads"] if h["heads"] == 129)
    assert refusal["outcome"] == "rejected" and "num_heads=129" in refusal["message"]
    assert {h["entry"] for h in cute["heads"] if h["outcome"] == "accepted"} == {
        "cute.compile.BlackwellMultiHeadLatentAttentionForwardFP16"
    }
    xqa = results[("trtllm-mla[backend=xqa]", 100)]
    assert xqa["status"] == "unsupported-arch"
    assert "SM120a" in xqa["heads"][0]["message"]


def test_auto_routes_sm120_dense_decode_to_xqa(cli_json):
    _, doc, _ = cli_json("matrix", "-k", "trtllm-mla[backend=auto]", "--sm", "120", "--heads", "64,128")
    [result] = doc["results"]
    assert result["accepted"] == [128]
    # The getter runs for real: the Python wrapper it builds calls the compiled xqa_wrapper_mla.
    assert result["heads"][1]["entry"] == "get_xqa_module_mla.xqa_wrapper_mla"


def test_sparse_top_k_axis_reaches_trtllm_gen_on_sm100(cli_json):
    _, doc, _ = cli_json(
        "matrix", "-k", "trtllm-mla", "--backend", "trtllm-gen", "--topk", "2048", "--sm", "100", "--heads", "16,128"
    )
    [result] = doc["results"]
    assert result["key"] == "trtllm-mla[backend=trtllm-gen,topk=2048]"
    assert result["config"]["topk"] == 2048
    assert result["accepted"] == [16, 128]


def test_pivot_on_two_axes_and_refuse_an_ambiguous_one(cli):
    code, out, _ = cli("matrix", "-k", "trtllm-mla", "--sm", "100,120", "--heads", "64,128", "--pivot", "backend,sm")
    assert code == 0
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line.split()[:1] in (["xqa"], ["auto"])}
    assert rows["xqa"] == ["unsupported-arch", "{128}"]
    assert rows["auto"] == ["{64,", "128}", "{128}"]
    code, _, err = cli("matrix", "-k", "trtllm-mla", "--sm", "100", "--heads", "64", "--pivot", "heads,sm")
    assert code == 2 and "several results would fall in one cell" in err and "they differ in kernel" in err


def test_an_ambiguous_pivot_is_refused_before_anything_is_probed(cli, monkeypatch):
    import hprobe.commands.matrix

    def probed(*_args, **_kwargs):
        raise AssertionError("probed before the pivot was checked")

    monkeypatch.setattr(hprobe.commands.matrix, "gather", probed)
    code, out, err = cli(
        "matrix",
        "-k",
        "dsv4-sparse-mla[backend=auto,dtype=bf16,kv_format=fp8,kv_pool=packed]",
        "--sm",
        "100,120",
        "--pivot",
        "release,heads",
    )
    assert code == 2 and out == "" and "several results would fall in one cell (installed; they differ in sm)" in err


def test_an_axis_no_selected_kernel_has_is_an_input_error(cli):
    code, out, err = cli("matrix", "-k", "xqa-mla", "--topk", "256")
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [
        "hprobe: error: --topk: none of the kernels probed has this axis (kernels with it: sm120-sparse-mla, "
        "sm120-sparse-mla-wrapper, sparse-mla-ts, trtllm-mla, trtllm-mla-prefill)"
    ]
    code, _, err = cli("matrix", "-k", "batch-mla", "--backend", "no-such")
    assert code == 2 and "backend 'no-such': expected one of auto, fa2, fa3, cutlass" in err


def test_table_options_choose_the_variant_and_bad_ones_point_at_the_line(cli_json, cli, write_table):
    body = """
[table]
name = "cutlass"
source = "tests"
[model]
name = "Kimi-K2"
num_q_heads = 64
tp = [1, 8]
[[backend]]
name = "cutlass"
kernel = "batch-mla"
backend = "cutlass"
sm = [100]
pad_to = [128]
"""
    code, doc, _ = cli_json("check", "--table", str(write_table(body)), "--sm", "100")
    assert code == 0
    assert {(f["n"], f["padded"], f["verdict"], f["kernel"]) for f in doc["findings"]} == {
        (64, 128, "ok", "batch-mla[backend=cutlass]"),
        (8, 128, "ok", "batch-mla[backend=cutlass]"),
    }
    bad = write_table(body.replace('backend = "cutlass"', "tile_q = 16"), "bad.toml")
    code, out, err = cli("check", "--table", str(bad))
    assert code == 2 and out == ""
    assert "bad.toml:9:" in err and "has no axis 'tile_q'" in err


def test_kernels_lists_axes(cli_json):
    code, doc, _ = cli_json("kernels")
    assert code == 0
    rows = {r["id"]: r for r in doc["kernels"]}
    assert set(rows) == set(PROBES)
    backend = next(a for a in rows["trtllm-mla"]["axes"] if a["name"] == "backend")
    assert backend["sweep"] and "cute-dsl" in backend["choices"]
    # The installed 0.6.14 predates the prefill entry point (0.7.1), the public
    # SM12x wrapper (0.7.0) and the prims_ts sparse decode wrapper.
    assert {k for k, r in rows.items() if not r["installed_flashinfer_has_entry_point"]} == {
        "trtllm-mla-prefill",
        "sm120-sparse-mla-wrapper",
        "sparse-mla-ts",
    }


def test_metadata_disagreement_is_printed_never_used_instead_of_the_probe():
    """A claim that differs from what the validators did is flagged as a note; the
    outcomes stay the probe's."""
    result = KernelSMResult("sm120-sparse-mla", 120, "x")
    for h in (8, 16, 24):
        result.heads[h] = HeadResult(h, Outcome.ACCEPTED if h != 24 else Outcome.REJECTED)

    class Claims:
        def metadata(self, *args):
            return Metadata("fixture metadata", True, [8, 24])

    _attach_metadata(None, Claims(), None, SM(12, 0), {}, [8, 16, 24], result)
    assert result.metadata == {"source": "fixture metadata", "sm_supported": True, "heads": [8, 24]}
    assert any(n.startswith("disagreement: fixture metadata claims h_q {24}") for n in result.notes)
    assert any("does not list h_q {16}" in n for n in result.notes)
    assert result.accepted() == [8, 16]


def test_capability_decorator_is_shown_beside_the_probe(cli_json):
    _, doc, _ = cli_json("matrix", "-k", "sm120-sparse-mla", "--sm", "100,120", "--heads", "8")
    results = _results(doc)
    assert results[("sm120-sparse-mla", 120)]["metadata"] == {
        "source": "supported_compute_capability",
        "sm_supported": True,
    }
    off = results[("sm120-sparse-mla", 100)]
    assert off["metadata"]["sm_supported"] is False
    # The JIT spec asks for SM12x (0.6.14 flashinfer/jit/mla.py:35-43) and the arch
    # list is SM100's, as on that GPU: refused in Python, agreeing with the decorator.
    assert off["status"] == "unsupported-arch"
    assert off["heads"][0]["location"].startswith("flashinfer/compilation_context.py")
    assert not any(n.startswith("disagreement") for n in off["notes"])


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("trtllm-mla", "trtllm-mla"),
        ("trtllm-mla[backend=auto]", "trtllm-mla"),
        ("trtllm-mla[dtype=fp8,backend=xqa]", "trtllm-mla[backend=xqa,dtype=fp8]"),
        ("sm120-sparse-mla[topk=512]", "sm120-sparse-mla[topk=512]"),
    ],
)
def test_variant_keys_are_canonical(key, expected):
    assert get_variant(key).key == expected


def test_text_output_prints_variant_keys_verbatim(cli, write_table):
    """Variant keys carry brackets; they are text, not markup."""
    code, out, _ = cli(
        "matrix", "-k", "xqa-mla", "--sm", "120", "--heads", "64,128", "--dtype=fp8", "--page-size", "32"
    )
    assert code == 0
    assert "xqa-mla[dtype=fp8,page_size=32]" in [line.strip() for line in out.splitlines()]
    table = write_table(
        '[table]\nname = "t"\n[model]\nname = "m"\nnum_q_heads = 128\n'
        '[[backend]]\nname = "b"\nkernel = "batch-mla"\nbackend = "cutlass"\nsm = [100]\npad_to = [128]\n'
    )
    code, out, _ = cli("check", "--table", str(table), "--sm", "100", "--details")
    assert code == 0
    assert "t · b → batch-mla[backend=cutlass]" in out


def test_axis_options_are_read_from_the_probes(cli):
    code, _, err = cli("matrix", "-k", "xqa-mla", "--bogus", "1")
    assert code == 2 and err.startswith(
        "hprobe: error: no such option: --bogus (`hprobe matrix --help` lists the options"
    )
    code, _, err = cli("matrix", "-k", "xqa-mla", "--page-sizes", "64")
    assert code == 2 and "(did you mean --page-size?)" in err
    code, _, err = cli("matrix", "-k", "xqa-mla", "--dtype")
    assert code == 2 and "--dtype needs a value" in err


def test_models_lists_mla_and_gqa_models_with_their_layers(cli, cli_json):
    code, doc, _ = cli_json("models")
    assert code == 0 and doc["schema"] == "hprobe.models/1"
    by_name = {m["name"]: m for m in doc["models"]}
    assert "layers" not in by_name["DeepSeek-V3"]
    assert by_name["Gemma-4-31B"]["layers"] == [
        {"name": "global", "num_kv_heads": 4, "head_dim": 512, "sinks": False},
        {"name": "sliding", "num_kv_heads": 16, "head_dim": 256, "sinks": False},
    ]
    assert all(m["citation"] for m in doc["models"])
    code, out, _ = cli("models")
    assert code == 0
    assert "gpt-oss-20b            64 query heads, 8 KV heads of dim 64 with sinks, TP 1/2/4/8/16;" in out
    assert "global 4 KV heads of dim 512, sliding 16 KV heads of dim 256" in out
