"""kernels/offers: what a loaded release claims beside what it answers. The
claim is read from the entry's own decorators (through wrappers and a class's
constructor), asked per backend where the decorator takes one; an entry
without a claim has none, never a guessed one."""

from __future__ import annotations

import functools
from types import SimpleNamespace

import pytest

from hprobe.kernels.offers import Metadata, capability_metadata, missing_parameter, sm120_decode_claim

pytestmark = pytest.mark.pure

SM100 = SimpleNamespace(number=100)


def _claims(supported: set[int], backends: dict[str, set[int]] | None = None):
    """A decorator shaped as flashinfer's `supported_compute_capability` /
    `backend_requirement`: the wrapper carries the claim."""

    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            return fn(*args, **kwargs)

        wrapper.is_compute_capability_supported = lambda cc: cc in supported  # type: ignore[attr-defined]
        if backends is not None:
            wrapper.is_backend_supported = lambda backend, cc: cc in backends[backend]  # type: ignore[attr-defined]
        return wrapper

    return decorate


def test_the_claim_is_the_entry_s_own_through_wrappers_and_constructors() -> None:
    @functools.lru_cache  # a wrapper over the decorated function
    @_claims({100, 103})
    def decode(query, kv_cache):
        return None

    assert capability_metadata(decode, SM100) == Metadata("supported_compute_capability", True)
    assert capability_metadata(decode, SimpleNamespace(number=120)) == Metadata("supported_compute_capability", False)

    class Wrapper:
        @_claims({90})
        def __init__(self, workspace):
            pass

    assert capability_metadata(Wrapper, SM100) == Metadata("supported_compute_capability", False)
    assert capability_metadata(lambda q: q, SM100) is None  # no claim: none invented


def test_a_backend_s_claim_is_asked_of_the_backend() -> None:
    @_claims({100, 103, 120}, backends={"trtllm-gen": {100, 103}, "xqa": {90, 120}})
    def decode(query, backend="auto"):
        return None

    assert capability_metadata(decode, SM100, "xqa") == Metadata("backend_requirement.is_backend_supported", False)
    assert capability_metadata(decode, SM100, "trtllm-gen").sm_supported is True
    assert capability_metadata(decode, SM100, "auto") == Metadata("supported_compute_capability", True)


def test_a_missing_parameter_is_said_with_the_entry_s_name() -> None:
    def trtllm_batch_decode_with_kv_cache_mla(query, kv_cache, backend="auto"):
        return None

    assert missing_parameter(trtllm_batch_decode_with_kv_cache_mla, "backend") is None
    assert missing_parameter(trtllm_batch_decode_with_kv_cache_mla, "sinks") == (
        "this release's trtllm_batch_decode_with_kv_cache_mla has no 'sinks' parameter"
    )
    assert missing_parameter(object(), "x") is None  # no signature to read: no reason invented  # type: ignore[arg-type]


def test_the_sm120_decode_claim_is_the_release_s_per_count_answer() -> None:
    class Family:
        def supports_decode(self, num_heads, topk, num_tokens, page_block_size):
            return num_heads in (16, 32, 64) and topk == 2048

    def configs(kv_cache_format="fp8"):
        return {"dsv4": Family()} if kv_cache_format == "fp8" else {}

    session = SimpleNamespace(resolve=lambda name: configs)
    assert sm120_decode_claim(session, "dsv4", "fp8", [8, 16, 64, 128], 2048, 1, 64) == [16, 64]
    assert sm120_decode_claim(session, "dsv4", "nvfp4", [16], 2048, 1, 64) is None  # no such family there
    assert sm120_decode_claim(SimpleNamespace(resolve=lambda name: None), "dsv4", "fp8", [16], 2048, 1, 64) is None

    def old_configs():  # before the kv_cache_format parameter: FP8 only
        return {"dsv4": Family()}

    old = SimpleNamespace(resolve=lambda name: old_configs)
    assert sm120_decode_claim(old, "dsv4", "fp8", [32], 2048, 1, 64) == [32]
    assert sm120_decode_claim(old, "dsv4", "nvfp4", [32], 2048, 1, 64) is None


def test_metadata_reads_back_as_written() -> None:
    for claim in (Metadata("s"), Metadata("s", False), Metadata("s", True, [8, 16])):
        assert Metadata.from_dict(claim.to_dict()) == claim
