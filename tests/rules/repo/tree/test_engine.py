"""rules/repo/tree/engine.py: which engine setting routes a path to FlashInfer, read
from the engine's own selection code. vLLM 0.34.0 picks its sparse MLA backend
on SM10x by KV cache dtype and head count, binding `sparse_backends` in `if`s
of its own: FlashInfer is the default for an FP8 KV cache only."""

from __future__ import annotations

import textwrap
from dataclasses import replace
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


def _module_at(tmp_path: Path, dotted: str, source: str) -> RepoIndex:
    """A tree holding `source` as the module `dotted`, its packages around it."""
    *packages, name = dotted.split(".")
    folder = tmp_path
    for package in packages:
        folder = folder / package
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "__init__.py").write_text("")
    (folder / f"{name}.py").write_text(textwrap.dedent(source))
    return RepoIndex.build(tmp_path)


def _reach(tmp_path: Path, value: str, source: str = PRIORITIES):
    index = _module_at(tmp_path, "vllm.platforms.cuda", source)
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
    return read_reach(index, setting)


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


# SGLang's DSA backend resolution (0.5.21-0.5.23 arg_groups/overrides.py,
# _dsa_split_backend_resolution), reduced: the engine sets the decode backend
# itself when the user gives none, by device capability, KV cache dtype, the
# model's sinks and HiSparse, leaving early from the branches that set it.
RESOLUTION = """
def _dsa_split_backend_resolution(view):
    hf_config = model_config_of(view).hf_config
    if not is_deepseek_dsa(hf_config):
        return {}
    if get_platform().is_xpu:
        declared = {}
        if view.dsa_decode_backend is None:
            declared["dsa_decode_backend"] = "intel_xpu"
        return declared
    major, _ = torch.cuda.get_device_capability()
    kv_cache_dtype = view.kv_cache_dtype
    user_set_decode = view.dsa_decode_backend is not None
    declared = {}
    is_glm_sm12_fp8 = (
        hf_config.architectures[0] == "GlmMoeDsaForCausalLM"
        and major == 12
        and kv_cache_dtype == "fp8_e4m3"
        and not get_platform().is_hip
    )
    if getattr(hf_config, "learnable_sink", False):
        backend = "flashmla_sparse"
        if not user_set_decode:
            declared["dsa_decode_backend"] = backend
        return declared
    if is_glm_sm12_fp8:
        backend = "flashinfer_sparse_mla"
        if not user_set_decode:
            declared["dsa_decode_backend"] = backend
        return declared
    if view.enable_hisparse:
        backend = _hisparse_default_backend(kv_cache_dtype)
        if not user_set_decode:
            declared["dsa_decode_backend"] = backend
        return declared
    if get_platform().is_hip:
        if not user_set_decode:
            declared["dsa_decode_backend"] = "triton"
    elif kv_cache_dtype == "fp8_e4m3":
        default = "trtllm" if major >= 10 else "flashmla_kv"
        if not user_set_decode:
            declared["dsa_decode_backend"] = default
    else:
        if not user_set_decode:
            declared["dsa_decode_backend"] = "trtllm" if major >= 10 else "fa3"
    return declared
"""
NOT_NVIDIA = (("get_platform().is_hip", ()), ("get_platform().is_xpu", ()))


def _assigned_by(tmp_path: Path, module: str, source: str, setting: EngineSetting, platform, sms: tuple[int, ...]):
    """How `setting` is read from `source` kept as `module` of a tree."""
    return read_reach(_module_at(tmp_path, module, source), setting, platform, sms)


def _set_by_engine(tmp_path: Path, value: str, sms: tuple[int, ...], source: str = RESOLUTION):
    module = "sglang.srt.arg_groups.overrides"
    setting = EngineSetting(
        "dsa_decode",
        "--dsa-decode-backend",
        value,
        None,
        "FlashMLA sparse",
        assigned_in=module,
        key="dsa_decode_backend",
        given="user_set_decode",
    )
    return _assigned_by(tmp_path, module, source, setting, NOT_NVIDIA, sms)


def test_a_key_the_engine_sets_by_capability_is_the_default_on_the_sms_it_picks(tmp_path):
    """On SM100/SM103 `major >= 10` holds for either KV cache dtype: trtllm is
    the default unless the model has sinks or HiSparse is on, which the
    engine's own code tests and hprobe cannot decide; the user's choice
    (`not user_set_decode`) is the premise of a default, not said."""
    reach = _set_by_engine(tmp_path, "trtllm", (100, 103))
    assert reach.default_reaches is None
    # The exit for a model that is not DSA is a test too: the default holds past it only.
    assert reach.default_when == (
        "is_deepseek_dsa(hf_config) and not getattr(hf_config, 'learnable_sink', False) and not view.enable_hisparse"
    )
    assert reach.source == "sglang/srt/arg_groups/overrides.py:42"  # the first that sets trtllm
    assert reach.scope().startswith("by default where is_deepseek_dsa(hf_config) and not getattr(")
    # The XPU, HIP and SM12x-GLM branches are false on SM100/SM103 and not listed.
    assert "intel_xpu" not in reach.default and "triton" not in reach.default
    assert "flashinfer_sparse_mla" not in reach.default and "flashmla_kv" not in reach.default
    assert reach.default.startswith(
        "flashmla_sparse where is_deepseek_dsa(hf_config) and getattr(hf_config, 'learnable_sink', False); "
    )


def test_on_hopper_the_same_code_never_picks_it(tmp_path):
    reach = _set_by_engine(tmp_path, "trtllm", (90,))
    assert reach.default_reaches is False and not reach.default_when
    assert "fa3 where" in reach.default and "flashmla_kv where" in reach.default
    assert reach.scope() == "under --dsa-decode-backend trtllm only"


def test_a_local_the_tests_read_is_followed_to_the_capability(tmp_path):
    """`is_glm_sm12_fp8` reads `major == 12`: on SM120 it is left to the model
    and the KV cache (said as the engine names it), on SM100 it is false."""
    on_sm120 = _set_by_engine(tmp_path / "a", "flashinfer_sparse_mla", (120, 121))
    assert on_sm120.default_when == (
        "is_deepseek_dsa(hf_config) and not getattr(hf_config, 'learnable_sink', False) and is_glm_sm12_fp8"
    )
    assert _set_by_engine(tmp_path / "b", "flashinfer_sparse_mla", (100,)).default_reaches is False


def test_sms_that_disagree_leave_the_capability_undecided(tmp_path):
    reach = _set_by_engine(tmp_path, "trtllm", (90, 100))
    assert reach.default_reaches is None
    assert "major >= 10" in reach.default_when


def test_a_value_set_unconditionally_and_only_that_one_is_the_default(tmp_path):
    source = """
    def resolve(view):
        user_set_decode = view.dsa_decode_backend is not None
        declared = {}
        if not user_set_decode:
            declared["dsa_decode_backend"] = "trtllm"
        return declared
    """
    assert _set_by_engine(tmp_path / "a", "trtllm", (100,), source).default_reaches is True
    # A local rebound in a loop is not known after it: its value is not guessed.
    rebound = """
    def resolve(view):
        backend = "trtllm"
        for option in view.options:
            backend = option
        declared = {}
        declared["dsa_decode_backend"] = backend
        return declared
    """
    reach = _set_by_engine(tmp_path / "b", "trtllm", (100,), rebound)
    assert reach.default_reaches is False
    assert reach.default.startswith("a value hprobe does not read where always")


def test_a_local_is_read_as_it_was_when_bound(tmp_path):
    """`limit = major` keeps the capability's major though `major` is rebound
    after it: a later assignment does not change what an earlier one read."""
    source = """
    def resolve(view):
        user_set_decode = view.dsa_decode_backend is not None
        major, _ = torch.cuda.get_device_capability()
        limit = major
        major = 0
        declared = {}
        if limit >= 10 and not user_set_decode:
            declared["dsa_decode_backend"] = "trtllm"
        return declared
    """
    # `if A and B:` is read a conjunct at a time: the capability decides one, the user's choice is the other.
    assert _set_by_engine(tmp_path, "trtllm", (100,), source).default_reaches is True
    # On SM90 the function sets nothing: the default is not this code's to say.
    hopper = _set_by_engine(tmp_path / "b", "trtllm", (90,), source)
    assert hopper.default_reaches is None and hopper.default.startswith("not set in sglang/srt/arg_groups/overrides.py")


# SGLang 0.5.23's Kimi K3 override (model_overrides/kimi_k3.py), reduced: the
# values are handed back in a dict or merged with update(), and the user's
# choice is a local that is true where they gave none.
KIMI = """
def _kimi_k3_overrides(server_args, hf_config):
    cfg = resolving_view(server_args)
    if cfg.dcp_size > 1:
        overrides = {}
        prefill_backend, decode_backend = attention_backends_of(cfg)
        if decode_backend == "cutedsl_mla" or decode_backend is None:
            overrides.update(prefill_attention_backend="trtllm_mla", decode_attention_backend="cutedsl_mla")
        return overrides
    if not (get_platform().is_sm100 and get_platform().device_sm in (100, 103)):
        return {}
    backends_unset = is_attention_backend_not_set(cfg)
    if cfg.speculative_algorithm != "DSPARK":
        if not backends_unset:
            return {}
        return {"decode_attention_backend": "trtllm_mla", "prefill_attention_backend": "trtllm_mla"}
    overrides = {}
    if backends_unset:
        backend = "trtllm_mla"
        overrides["decode_attention_backend"] = backend
    return overrides
"""
SM10X = (("get_platform().is_sm100", (100, 103)), ("get_platform().device_sm in (100, 103)", (100, 103)))


def _kimi(tmp_path: Path, value: str, sms: tuple[int, ...]):
    module = "sglang.srt.arg_groups.model_overrides.kimi_k3"
    setting = replace(
        EngineSetting("kimi", "--decode-attention-backend", value, None, "the backend given"),
        assigned_in=module,
        key="decode_attention_backend",
        given="not backends_unset",
    )
    return _assigned_by(tmp_path, module, KIMI, setting, SM10X, sms)


def test_values_handed_back_in_a_dict_or_an_update_are_read_as_assignments(tmp_path):
    """trtllm_mla is Kimi K3's default on SM10x with or without DSPARK (the
    two alternatives are one), unless decode context parallelism is on, where
    cutedsl_mla is: a test with `or` is said in parentheses."""
    trtllm = _kimi(tmp_path / "a", "trtllm_mla", (100, 103))
    assert trtllm.default_when == "cfg.dcp_size <= 1"
    assert trtllm.source.endswith("kimi_k3.py:16")  # the dict handed back
    cutedsl = _kimi(tmp_path / "b", "cutedsl_mla", (100, 103))
    assert cutedsl.default_when == "cfg.dcp_size > 1 and (decode_backend == 'cutedsl_mla' or decode_backend is None)"
    # On SM120 only the DCP branch, which tests no platform, sets a value.
    assert _kimi(tmp_path / "c", "trtllm_mla", (120,)).default_reaches is False
