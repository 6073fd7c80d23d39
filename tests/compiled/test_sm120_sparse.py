"""compiled/sm120_sparse: which port reads like a release (by the digest of
every C++ function it follows), and a probe's counts refused by the entry's
own checks, with their place in the release."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

from hprobe.compiled.files import ENTRY_READ
from hprobe.compiled.sm120_sparse import Port, parse_call, port_for


def _installed() -> Path:
    spec = importlib.util.find_spec("flashinfer")
    assert spec is not None and spec.origin is not None
    return Path(spec.origin).parent


def test_the_installed_release_reads_like_the_0_6_14_era_and_an_edited_copy_like_none(tmp_path):
    assert port_for(_installed()) == port_for(_installed())
    found = port_for(_installed())
    assert isinstance(found, Port) and found.era == "0.6.14 – 0.6.17"
    copy = tmp_path / "flashinfer"
    for relative in ENTRY_READ:
        (copy / "data" / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(_installed() / "data" / relative, copy / "data" / relative)
    prefill = copy / "data" / "csrc" / "sparse_mla_sm120_prefill.cu"
    # A top-k width added to the DSV4 switch: the port no longer describes it.
    prefill.write_text(prefill.read_text().replace("else if (topk == 512)", "else if (topk == 640)", 1))
    changed = port_for(copy)
    assert isinstance(changed, str) and "dispatch_dsv4_single" in changed


@pytest.mark.pure
def test_a_recorded_launch_reads_back_as_the_entry_s_arguments():
    c = parse_call("128,4,512;2,64,584;128,128;128,4,512;128,4;0.04;1;128;-;-;-;-")
    assert (c.q, c.kv_cache, c.indices, c.model_type, c.topk_length, c.extra_kv_cache) == (
        (128, 4, 512),
        (2, 64, 584),
        (128, 128),
        1,
        (128,),
        None,
    )
    with pytest.raises(ValueError):
        parse_call("128,4,512;2,64,584")


def test_a_probe_s_counts_are_refused_by_the_entry_s_checks(cli_json):
    """sm120-sparse-mla on 0.6.14, 128 tokens (prefill) at top-k 128: the DSv4
    prefill switch serves 16/32/64/128 heads; one token: the counts Python
    sends to the paged entry meet its decode check (GLM-5 at TP16 on SM12x)."""
    code, doc, err = cli_json(
        "matrix",
        "-k",
        "sm120-sparse-mla[tokens=128]",
        "-k",
        "sm120-sparse-mla",
        "--sm",
        "120",
        "--heads",
        "1-16,32,64,128",
    )
    assert code == 0, err
    prefill, decode = doc["results"]
    assert prefill["accepted"] == [16, 32, 64, 128]
    refused = prefill["heads"][3]  # 4 heads
    assert refused["error_type"] == "compiled check" and refused["message"].startswith(
        "Unsupported sparse-MLA prefill configuration: model=DSV4 num_heads=4 topk=128"
    )
    assert refused["location"] == "flashinfer/data/csrc/sparse_mla_sm120.cu:271 (SparseMlaSm120PagedAttention)"
    assert decode["accepted"] == [8, 16, 32, 64, 128]
    four = decode["heads"][3]
    assert four["message"].startswith("Decode (num_tokens <= 64) must go through")
    assert four["location"] == "flashinfer/data/csrc/sparse_mla_sm120.cu:261 (SparseMlaSm120PagedAttention)"
