"""device/boundary.py: where a probe stops. A getter that fetches prebuilt
cubins (trtllm-gen's FMHA) gets stand-in artefacts and returns a stand-in
module, so every Python check the entry runs after the getter runs too, and
the boundary is the launch; on the releases whose entry calls the getter
before its last shape check (0.6.0 - 0.6.11), that check answers."""

from __future__ import annotations

import pytest

from hprobe.device.boundary import BoundaryReached, artefact_stand_in


@pytest.mark.pure
def test_trtllm_gen_artefacts_are_stand_ins_and_any_other_is_the_boundary():
    checksums = artefact_stand_in("158f6fa0/fmha/trtllm-gen/checksums.txt", "sha")
    # What the getter parses for the header's hash: a line `sha256  path` naming the header.
    sha256, path = checksums.decode().split()
    assert len(sha256) == 64 and path.endswith("flashInferMetaInfo.h")
    assert artefact_stand_in("158f6fa0/fmha/trtllm-gen/include/flashInferMetaInfo.h", "sha")
    with pytest.raises(BoundaryReached) as reached:
        artefact_stand_in("2d6a5a029eefcc388ec0ceb87efb55d8bcce5c3c/gemm/trtllm-gen/checksums.txt", "sha")
    assert str(reached.value.entry).endswith("<cubin artefacts gemm/trtllm-gen>")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("release", "axis", "message", "location"),
    [
        # 0.6.0 takes the DeepSeek latent width only, in the shape check after the getter.
        (
            "0.6.0",
            "kv_lora_rank=256",
            "Expected kv_lora_rank == 512, got 256",
            "flashinfer/mla.py:83 (_check_trtllm_gen_mla_shape)",
        ),
        # 0.6.11 takes two widths; its page-size check runs after the getter too.
        (
            "0.6.11",
            "page_size=16",
            "Supported block_size are 32 and 64, got 16",
            "flashinfer/mla/_core.py:745 (trtllm_batch_decode_with_kv_cache_mla)",
        ),
    ],
)
def test_the_checks_after_the_getter_run_on_releases_that_call_the_getter_first(
    cli_json, release, axis, message, location
):
    """0.6.0 - 0.6.11 call get_trtllm_gen_fmha_module() before the entry's
    last Python checks: what those checks refuse is refused with their own
    words and place, not taken as reaching compiled code; the default call
    reaches the launch, named after the launcher function."""
    code, doc, err = cli_json(
        "matrix",
        "-k",
        f"trtllm-mla[backend=trtllm-gen,{axis}]",
        "-k",
        "trtllm-mla[backend=trtllm-gen]",
        "--sm",
        "100",
        "--heads",
        "64,128",
        "--flashinfer",
        release,
    )
    assert code == 0, err
    refused, default = doc["results"]
    assert refused["status"] == "unsupported-config", refused
    assert (refused["heads"][0]["message"], refused["heads"][0]["location"]) == (message, location)
    assert {h["entry"] for h in default["heads"]} == {"get_trtllm_gen_fmha_module.trtllm_paged_attention_decode"}
