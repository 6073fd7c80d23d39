"""rules/repo/tree/engine.py: which engine setting routes a path to FlashInfer, read
from the engine's own selection code. vLLM 0.34.0 picks its sparse MLA backend
on SM10x by KV cache dtype and head count, binding `sparse_backends` in `if`s
of its own: FlashInfer is the default for an FP8 KV cache only."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from hprobe.rules.repo.tree.engine import read_reach
from hprobe.rules.repo.tree.mapping import EngineSetting
from hprobe.rules.repo.tree.scan import RepoIndex

pytestmark = pytest.mark.pure

# vLLM 0.34.0's platforms/cuda.py, _get_backend_priorities, reduced to the MLA part.
PRIORITIES = """
def _get_backend_priorities(use_mla, device_capability, num_heads=None, kv_cache_dtype=None):
    if use_mla:
        if device_capability.major == 10:
            if kv_cache_dtype is not None and is_quantized_kv_cache(kv_cache_dtype):
                sparse_backends = [
                    AttentionBackendEnum.FLASHINFER_MLA_SPARSE,
                    AttentionBackendEnum.FLASHMLA_SPARSE,
                ]
            else:
                if num_heads is not None and num_heads <= 16:
                    sparse_backends = [
                        AttentionBackendEnum.FLASH_ATTN_MLA_SPARSE_FA4,
                        AttentionBackendEnum.FLASHINFER_MLA_SPARSE,
                        AttentionBackendEnum.FLASHMLA_SPARSE,
                    ]
                else:
                    sparse_backends = [
                        AttentionBackendEnum.FLASHMLA_SPARSE,
                        AttentionBackendEnum.FLASHINFER_MLA_SPARSE,
                    ]
            return [AttentionBackendEnum.FLASHINFER_MLA, AttentionBackendEnum.TRITON_MLA, *sparse_backends]
        return [AttentionBackendEnum.TRITON_MLA]
"""


def _reach(tmp_path: Path, value: str, source: str = PRIORITIES):
    platforms = tmp_path / "vllm" / "platforms"
    platforms.mkdir(parents=True)
    (tmp_path / "vllm" / "__init__.py").write_text("")
    (platforms / "__init__.py").write_text("")
    (platforms / "cuda.py").write_text(textwrap.dedent(source))
    setting = EngineSetting(
        "mla_sparse_backend",
        "--attention-backend",
        value,
        None,
        "FlashMLA sparse or FA4",
        priority_in="vllm.platforms.cuda._get_backend_priorities",
        branch="device_capability.major == 10",
        priority_list="sparse_backends",
    )
    return read_reach(RepoIndex.build(tmp_path), setting)


def test_flashinfer_is_the_default_where_the_engine_lists_it_first(tmp_path):
    reach = _reach(tmp_path, "FLASHINFER_MLA_SPARSE")
    assert reach.default_reaches is None
    assert reach.default_when == "kv_cache_dtype is not None and is_quantized_kv_cache(kv_cache_dtype)"
    assert reach.source == "vllm/platforms/cuda.py:6"
    assert reach.default == (
        "FLASHINFER_MLA_SPARSE where kv_cache_dtype is not None and is_quantized_kv_cache(kv_cache_dtype); "
        "FLASH_ATTN_MLA_SPARSE_FA4 where not (kv_cache_dtype is not None and is_quantized_kv_cache(kv_cache_dtype)) "
        "and num_heads is not None and num_heads <= 16; "
        "FLASHMLA_SPARSE where not (kv_cache_dtype is not None and is_quantized_kv_cache(kv_cache_dtype)) "
        "and not (num_heads is not None and num_heads <= 16)"
    )
    # Every verdict and change on it is scoped to those settings, and to the flag elsewhere.
    assert reach.scope() == (
        "by default where kv_cache_dtype is not None and is_quantized_kv_cache(kv_cache_dtype), "
        "else under --attention-backend FLASHINFER_MLA_SPARSE"
    )
    assert reach.words().startswith("reaches FlashInfer by default where kv_cache_dtype is not None")


def test_a_backend_first_nowhere_is_never_the_default_and_one_first_everywhere_always(tmp_path):
    never = _reach(tmp_path / "a", "FLASH_ATTN_MLA_SPARSE_FA4X")
    assert never.default_reaches is False and not never.default_when
    assert never.scope() == "under --attention-backend FLASH_ATTN_MLA_SPARSE_FA4X only"
    always = _reach(
        tmp_path / "b",
        "FLASHMLA_SPARSE",
        PRIORITIES.replace(
            "FLASHINFER_MLA_SPARSE,\n                    AttentionBackendEnum.FLASHMLA_SPARSE", "FLASHMLA_SPARSE"
        ).replace("FLASH_ATTN_MLA_SPARSE_FA4,", "FLASHMLA_SPARSE,"),
    )
    assert always.default_reaches is True and not always.default_when


def test_a_tree_without_the_list_says_where_it_looked(tmp_path):
    reach = _reach(tmp_path, "FLASHINFER_MLA_SPARSE", PRIORITIES.replace("sparse_backends", "backends"))
    assert reach.default_reaches is None and not reach.default_when
    assert reach.default == "no list sparse_backends under `device_capability.major == 10`"
    assert reach.source == "vllm/platforms/cuda.py:4"


def test_an_alternative_an_earlier_one_covers_is_said_without_its_negation(tmp_path):
    """vLLM 0.25.0 put FlashInfer first for an FP8 KV cache and, for BF16, at
    <= 16 heads: `A or (not (A) and B)`, said as `A or B`."""
    reach = _reach(
        tmp_path,
        "FLASHINFER_MLA_SPARSE",
        PRIORITIES.replace(
            "AttentionBackendEnum.FLASH_ATTN_MLA_SPARSE_FA4,\n                        "
            "AttentionBackendEnum.FLASHINFER_MLA_SPARSE,",
            "AttentionBackendEnum.FLASHINFER_MLA_SPARSE,",
        ),
    )
    assert reach.default_when == (
        "kv_cache_dtype is not None and is_quantized_kv_cache(kv_cache_dtype) "
        "or num_heads is not None and num_heads <= 16"
    )
