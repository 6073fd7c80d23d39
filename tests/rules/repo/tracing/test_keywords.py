"""The keywords an engine's call hands FlashInfer that change its dispatch,
read from the engine's source (rules/repo/tracing/keywords.py): spelled at the call,
carried by a `**dict` built in the function under tests the evaluator decides,
or by a `**kwargs` parameter its callers fill; what cannot be told is unknown
with the file:line, never assumed absent."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from hprobe.rules.repo.tracing.keywords import read_keywords
from hprobe.rules.repo.tree.scan import RepoIndex

pytestmark = pytest.mark.pure

NAMES = frozenset({"backend", "multi_ctas_kv_counter_buffer", "sparse_mla_top_k"})

# SGLang 0.5.22's TRTLLMMLABackend._run_decode_kernel, reduced: the backend is
# passed only when it is not trtllm-gen, the counter buffer only when it is.
BACKEND = """
import flashinfer


class Base:
    def __init__(self, runner):
        self.device = runner.device


class TRTLLMMLABackend(Base):
    def __init__(self, runner, backend: str = "trtllm-gen"):
        super().__init__(runner)
        self.backend = backend
        self._counter = make_counter()

    def decode(self, query, undecided):
        extra_kwargs = {"backend": self.backend} if self.backend != "trtllm-gen" else {}
        if self.backend == "trtllm-gen":
            extra_kwargs["multi_ctas_kv_counter_buffer"] = self._counter
        if undecided:
            extra_kwargs["enable_pdl"] = False
        return flashinfer.decode.trtllm_batch_decode_with_kv_cache_mla(query=query, **extra_kwargs)

    def maybe(self, query, undecided):
        kwargs = dict(backend="trtllm-gen")
        if undecided:
            kwargs["multi_ctas_kv_counter_buffer"] = self._counter
        return flashinfer.decode.trtllm_batch_decode_with_kv_cache_mla(query=query, **kwargs)

    def dropped(self, query):
        kwargs = {"multi_ctas_kv_counter_buffer": self._counter, "sparse_mla_top_k": 2048}
        kwargs.pop("multi_ctas_kv_counter_buffer")
        return flashinfer.decode.trtllm_batch_decode_with_kv_cache_mla(query=query, **kwargs)

    def handed_on(self, query):
        kwargs = {}
        fill(kwargs)
        return flashinfer.decode.trtllm_batch_decode_with_kv_cache_mla(query=query, **kwargs)
"""

# SGLang's DSA decode context parallel helper: **attention_kwargs from its callers.
HELPER = """
import flashinfer


def sharded(*, query, **attention_kwargs):
    attention_kwargs.pop("sparse_mla_top_k_lens", None)
    for start in range(4):
        attention_kwargs["enable_pdl"] = False
        out = flashinfer.decode.trtllm_batch_decode_with_kv_cache_mla(query=query, **attention_kwargs)
    return out
"""

CALLER = """
from .helper import sharded


def forward(q, buffer):
    attention_kwargs = dict(backend="trtllm-gen", sparse_mla_top_k=2048, multi_ctas_kv_counter_buffer=buffer)
    return sharded(query=q, **attention_kwargs)
"""

OTHER_CALLER = """
from .helper import sharded


def forward_plain(q):
    return sharded(query=q, backend="trtllm-gen", sparse_mla_top_k=2048)
"""


def _tree(tmp_path: Path, files: dict[str, str]) -> RepoIndex:
    package = tmp_path / "engine"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for name, text in files.items():
        (package / name).write_text(textwrap.dedent(text))
    return RepoIndex.build(tmp_path)


def _passed(reading) -> dict[str, str]:
    return {k: ast.unparse(v) for k, v in reading.passed.items()}


def _calls(index: RepoIndex, module: str) -> list[int]:
    info = index.by_suffix(module)
    assert info is not None
    return sorted(
        n.lineno
        for n in ast.walk(info.tree)
        if isinstance(n, ast.Call) and ast.unparse(n.func).endswith("trtllm_batch_decode_with_kv_cache_mla")
    )


def _reading_at(index: RepoIndex, module: str, nth: int):
    info = index.by_suffix(module)
    assert info is not None
    return read_keywords(index, info, _calls(index, module)[nth], NAMES)[0]


def test_a_dict_built_under_decided_tests_carries_the_counter_and_no_backend(tmp_path):
    index = _tree(tmp_path, {"backend.py": BACKEND})
    reading = _reading_at(index, "engine.backend", 0)
    # The constructor's default decides both tests: no backend (flashinfer's auto), a counter buffer.
    assert _passed(reading) == {"multi_ctas_kv_counter_buffer": "self._counter"}
    assert reading.unknown == {}
    # The value the tests read is said, with where it was set.
    assert len(reading.assumed) == 1 and reading.assumed[0].startswith(
        "self.backend = 'trtllm-gen' (TRTLLMMLABackend's constructor, "
    )


def test_a_keyword_set_under_an_undecided_test_is_unknown_with_its_line(tmp_path):
    index = _tree(tmp_path, {"backend.py": BACKEND})
    reading = _reading_at(index, "engine.backend", 1)
    assert _passed(reading) == {"backend": "'trtllm-gen'"}
    unknown = reading.unknown["multi_ctas_kv_counter_buffer"]
    assert unknown.where.endswith("engine/backend.py:27") and "test not decided: `undecided`" in unknown.why


def test_a_popped_key_is_absent_and_a_dict_handed_to_a_call_is_unknown(tmp_path):
    index = _tree(tmp_path, {"backend.py": BACKEND})
    dropped = _reading_at(index, "engine.backend", 2)
    assert _passed(dropped) == {"sparse_mla_top_k": "2048"} and dropped.unknown == {}
    handed = _reading_at(index, "engine.backend", 3)
    assert handed.passed == {} and set(handed.unknown) == NAMES
    assert all("handed to fill()" in u.why for u in handed.unknown.values())


def test_kwargs_of_a_helper_come_from_its_callers(tmp_path):
    index = _tree(tmp_path, {"helper.py": HELPER, "caller.py": CALLER})
    reading = _reading_at(index, "engine.helper", 0)
    assert _passed(reading) == {
        "backend": "'trtllm-gen'",
        "sparse_mla_top_k": "2048",
        "multi_ctas_kv_counter_buffer": "buffer",
    }
    assert reading.unknown == {}


def test_callers_that_disagree_leave_the_keyword_unknown(tmp_path):
    index = _tree(tmp_path, {"helper.py": HELPER, "caller.py": CALLER, "other.py": OTHER_CALLER})
    reading = _reading_at(index, "engine.helper", 0)
    assert _passed(reading) == {"backend": "'trtllm-gen'", "sparse_mla_top_k": "2048"}
    assert (
        "the 2 callers of sharded pass multi_ctas_kv_counter_buffer differently"
        in reading.unknown["multi_ctas_kv_counter_buffer"].why
    )


def test_a_helper_no_one_calls_leaves_its_kwargs_unknown(tmp_path):
    index = _tree(tmp_path, {"helper.py": HELPER})
    reading = _reading_at(index, "engine.helper", 0)
    assert reading.passed == {} and set(reading.unknown) == NAMES
    assert "no call of sharded in the tree fills its **kwargs" in reading.unknown["backend"].why


# vLLM 0.34.0's FlashInferMLAImpl.forward_mqa, reduced: the backend comes from a
# selector per count; flashinfer's auto gets a counter buffer at pages of 32 or 64.
SELECTED = """
import flashinfer


def _select_mla_decode_backend(num_heads):
    return "cute-dsl" if 64 < num_heads < 128 else None


class FlashInferMLAImpl:
    def __init__(self, dcp_world_size):
        self.dcp_world_size = dcp_world_size

    def forward_mqa(self, q, kv_c_and_k_pe_cache, heads):
        extra_kwargs = {}
        decode_backend: str | None
        if self.dcp_world_size > 1:
            extra_kwargs.update(enable_dcp=True)
            decode_backend = "cute-dsl"
        else:
            decode_backend = _select_mla_decode_backend(heads)
        if decode_backend:
            extra_kwargs["backend"] = decode_backend
        elif kv_c_and_k_pe_cache.shape[-2] in (32, 64):
            extra_kwargs["multi_ctas_kv_counter_buffer"] = make_counter()
        return flashinfer.decode.trtllm_batch_decode_with_kv_cache_mla(query=q, **extra_kwargs)
"""


def test_a_selector_result_and_the_paths_conditions_decide_the_keywords(tmp_path):
    index = _tree(tmp_path, {"mla.py": SELECTED})
    info = index.by_suffix("engine.mla")
    assert info is not None
    line = _calls(index, "engine.mla")[0]
    conditions = {"self.dcp_world_size > 1": False, "kv_c_and_k_pe_cache.shape[-2] in (32, 64)": True}
    # Where the selector picks no backend: auto, with the counter buffer.
    auto, _, _ = read_keywords(index, info, line, NAMES, conditions, {"_select_mla_decode_backend": None})
    assert _passed(auto) == {"multi_ctas_kv_counter_buffer": "make_counter()"} and auto.unknown == {}
    # Where it picks cute-dsl: that backend, no buffer.
    cute, _, _ = read_keywords(index, info, line, NAMES, conditions, {"_select_mla_decode_backend": "cute-dsl"})
    assert _passed(cute) == {"backend": "decode_backend"} and cute.unknown == {}
    # Without the path's conditions the DCP branch and the page size are undecided: unknown, never assumed.
    bare, _, _ = read_keywords(index, info, line, NAMES, None, {"_select_mla_decode_backend": None})
    assert set(bare.unknown) == {"backend", "multi_ctas_kv_counter_buffer"}


# vLLM 0.34.0's drafter `folded_decode`, reduced: a branch that hands the dict
# on and returns never reaches the call after it; one that may fall through does.
LEAVING = """
import flashinfer


def folded(q, planned, tiers, buffer):
    common = dict(query=q)
    if planned == "cute-dsl" and tiers:
        common["backend"] = planned
        return split(common)
    if tiers:
        common["sparse_mla_top_k"] = 2048
        if planned:
            raise ValueError(planned)
    for _ in range(2):
        if planned:
            common["multi_ctas_kv_counter_buffer"] = buffer
            continue
    return flashinfer.decode.trtllm_batch_decode_with_kv_cache_mla(**common)


def finally_holds_the_call(q, planned):
    common = dict(query=q)
    try:
        if planned:
            common["sparse_mla_top_k"] = 2048
            return None
    finally:
        flashinfer.decode.trtllm_batch_decode_with_kv_cache_mla(**common)
"""


def test_a_branch_that_leaves_the_function_does_not_reach_a_later_call(tmp_path):
    index = _tree(tmp_path, {"fold.py": LEAVING})
    folded = _reading_at(index, "engine.fold", 0)
    # The returning branch's `backend` and hand-off are gone (flashinfer's default
    # backend); the branch that may fall through (its raise is nested) and the
    # loop's `continue` still count.
    assert folded.passed == {}
    assert set(folded.unknown) == {"sparse_mla_top_k", "multi_ctas_kv_counter_buffer"}
    # A return runs through the `finally` that holds the call: its change reaches it.
    held = _reading_at(index, "engine.fold", 1)
    assert set(held.unknown) == {"sparse_mla_top_k"}


BOUND = Path(__file__).resolve().parents[3] / "fixtures" / "repos" / "boundcall"


@pytest.mark.parametrize(
    ("cls", "line", "form"),
    [
        # Spelled at the call, each keyword on its own line: that line is where it is passed.
        (
            "StorageOffsets",
            19,
            {
                "positional": 0,
                "keywords": (
                    "query",
                    "swa_kv_cache",
                    "workspace_buffer",
                    "sparse_indices",
                    "sparse_indices_are_storage_offsets",
                ),
                "place": ("sparse_indices_are_storage_offsets", "engine/attention.py:24"),
            },
        ),
        # A ** of a dict built under a test hprobe does not decide: what both runs pass,
        # and what only one does, apart, with where it is set.
        (
            "ScaledOnSomeRuns",
            34,
            {
                "positional": 0,
                "keywords": ("query", "swa_kv_cache", "workspace_buffer", "sparse_indices"),
                "conditional": ("dsv4_output_scale", "out"),
                "place": ("dsv4_output_scale", "engine/attention.py:31"),
            },
        ),
        ("NoBackendPassed", 41, {"positional": 4, "keywords": ()}),
    ],
)
def test_the_form_of_a_call_is_what_its_source_passes(cls, line, form):
    from hprobe.rules.repo.tracing.keywords import call_form

    index = RepoIndex.build(BOUND)
    module = index.by_suffix("engine.attention")
    assert module is not None
    found = call_form(index, module, line, "trtllm_batch_decode_sparse_mla_dsv4", f"engine/attention.py:{line}")
    assert found.positional == form["positional"] and found.keywords == form["keywords"], found
    assert tuple(sorted(k for k, _ in found.conditional)) == form.get("conditional", ())
    assert found.unknown is None
    if "place" in form:
        keyword, place = form["place"]
        assert found.place(keyword) == place


def test_a_dict_no_reading_follows_leaves_the_calls_keywords_unknown(tmp_path):
    from hprobe.rules.repo.tracing.keywords import call_form

    source = """
from flashinfer.mla import trtllm_batch_decode_with_kv_cache_mla

def run(q, make):
    extra = make()
    return trtllm_batch_decode_with_kv_cache_mla(q, **extra)
"""
    index = _tree(tmp_path, {"run.py": source})
    module = index.by_suffix("engine.run")
    assert module is not None
    found = call_form(index, module, 6, "trtllm_batch_decode_with_kv_cache_mla", "engine/run.py:6")
    assert found.positional == 1 and found.unknown is not None and "make()" in found.unknown


PACKED = """
from flashinfer.decode import trtllm_batch_decode_with_kv_cache_mla


def split(common, rest):
    return trtllm_batch_decode_with_kv_cache_mla(**dict(common, seq_lens=rest, sparse_mla_top_k=2048))


def merged(common, out):
    return trtllm_batch_decode_with_kv_cache_mla(**{**common, "out": out, "backend": "xqa"})


def folded(q, rest):
    common = dict(query=q, backend="trtllm-gen")
    if rest:
        return split(common, rest)
    return merged(common, rest)
"""


def test_a_dict_packed_from_a_parameter_carries_what_its_callers_hand_in(tmp_path):
    """`**dict(common, k=v)` and `{**common, "k": v}`: `common`'s keys (what
    the one caller hands the parameter), each later key over them."""
    index = _tree(tmp_path, {"packed.py": PACKED})
    split_ = _reading_at(index, "engine.packed", 0)
    assert _passed(split_) == {"backend": "'trtllm-gen'", "sparse_mla_top_k": "2048"} and split_.unknown == {}
    merged_ = _reading_at(index, "engine.packed", 1)
    assert _passed(merged_) == {"backend": "'xqa'"} and merged_.unknown == {}


def test_callers_that_hand_a_dict_parameter_different_keys_leave_them_unknown(tmp_path):
    text = PACKED + '\n\ndef other(q):\n    return split(dict(query=q, backend="cute-dsl"), 1)\n'
    index = _tree(tmp_path, {"packed.py": text})
    reading = _reading_at(index, "engine.packed", 0)
    assert _passed(reading) == {"sparse_mla_top_k": "2048"}
    assert "the 2 callers of split hand backend differently" in str(reading.unknown["backend"])
    # A value that is the caller's own name is passed as written: the keyword
    # is there, its value is words a reading cannot take as a literal.
    named = PACKED.replace('backend="trtllm-gen"', "backend=choice")
    (tmp_path / "c").mkdir()
    index = _tree(tmp_path / "c", {"packed.py": named})
    reading = _reading_at(index, "engine.packed", 0)
    assert _passed(reading)["backend"] == "choice" and "backend" not in reading.unknown
    # A caller that hands it through *args says so.
    spread = PACKED + "\n\ndef spreading(args):\n    return split(*args)\n"
    (tmp_path / "b").mkdir()
    index = _tree(tmp_path / "b", {"packed.py": spread})
    reading = _reading_at(index, "engine.packed", 0)
    assert "hands split its common in a way hprobe does not read" in str(reading.unknown["backend"])


ASSIGNED = """
from flashinfer.decode import trtllm_batch_decode_with_kv_cache_mla


def split(common, rest, tot):
    trtllm_batch_decode_with_kv_cache_mla(**dict(common, seq_lens=rest))
    for rows in rest:
        args = dict(common, seq_lens=rows, sparse_mla_top_k=2048)
        if tot is not None:
            args["out"] = tot
        trtllm_batch_decode_with_kv_cache_mla(**args)


def folded(q, rest):
    common = dict(query=q, backend="trtllm-gen")
    return split(common, rest, None)
"""


def test_a_dict_packed_into_a_name_carries_its_bases_keys(tmp_path):
    """`args = dict(common, k=v)` then `**args` (vLLM 0.34.0's drafter,
    balanced_decode): `common`'s keys as they stand at the assignment, each
    written key over them; a key set later under a test is read as before.
    `dict(common, ...)` before it copies `common` and leaves it as it was."""
    index = _tree(tmp_path, {"assigned.py": ASSIGNED})
    assert _passed(_reading_at(index, "engine.assigned", 0)) == {"backend": "'trtllm-gen'"}
    reading = _reading_at(index, "engine.assigned", 1)
    assert _passed(reading) == {"backend": "'trtllm-gen'", "sparse_mla_top_k": "2048"} and reading.unknown == {}
    # Written over the base: the assignment's own value wins.
    over = ASSIGNED.replace("sparse_mla_top_k=2048)", 'sparse_mla_top_k=2048, backend="xqa")')
    (tmp_path / "b").mkdir()
    index = _tree(tmp_path / "b", {"assigned.py": over})
    assert _passed(_reading_at(index, "engine.assigned", 1))["backend"] == "'xqa'"
    # A key the caller sets in the base before handing it in is carried.
    later = ASSIGNED.replace(
        "    return split(common, rest, None)", '    common["backend"] = "xqa"\n    return split(common, rest, None)'
    )
    (tmp_path / "c").mkdir()
    index = _tree(tmp_path / "c", {"assigned.py": later})
    assert _passed(_reading_at(index, "engine.assigned", 1))["backend"] == "'xqa'"


NARROWED = """
from flashinfer.decode import trtllm_batch_decode_with_kv_cache_mla


def run(common):
    return trtllm_batch_decode_with_kv_cache_mla(**common)


def folded(q, planned, tiers, pick):
    common = dict(query=q)
    if planned == "cute-dsl" and tiers:
        common["backend"] = planned
        return run(common)
    if "xqa" == planned:
        return trtllm_batch_decode_with_kv_cache_mla(query=q, backend=planned)
    if planned == "auto":
        planned = pick()
        return trtllm_batch_decode_with_kv_cache_mla(query=q, backend=planned)
    if planned == "trtllm-gen" or tiers:
        return trtllm_batch_decode_with_kv_cache_mla(query=q, backend=planned)
    return trtllm_batch_decode_with_kv_cache_mla(query=q, backend=planned)
"""


def test_a_name_an_enclosing_test_holds_equal_to_a_literal_is_that_literal(tmp_path):
    """`common["backend"] = planned` under `if planned == "cute-dsl" and tiers:`
    (vLLM 0.34.0's drafter) passes "cute-dsl"; a name rebound in the `if`'s
    body, a test that is an `or`, and no test at all leave the name as written."""
    index = _tree(tmp_path, {"narrowed.py": NARROWED})
    passed = [_passed(_reading_at(index, "engine.narrowed", nth)).get("backend") for nth in range(5)]
    assert passed == ["'cute-dsl'", "'xqa'", "planned", "planned", "planned"]


def test_a_name_brought_in_by_a_packed_base_is_not_narrowed_by_this_functions_tests(tmp_path):
    """`args = dict(common)` under `if planned == "xqa":` in `split`: the
    `planned` that `common` carries is the caller's, not split's."""
    text = """
from flashinfer.decode import trtllm_batch_decode_with_kv_cache_mla


def split(common, planned):
    if planned == "xqa":
        args = dict(common)
        return trtllm_batch_decode_with_kv_cache_mla(**args)


def folded(q, planned):
    common = dict(query=q, backend=planned)
    return split(common, "xqa")
"""
    index = _tree(tmp_path, {"mixed.py": text})
    assert _passed(_reading_at(index, "engine.mixed", 0)) == {"backend": "planned"}


# SGLang 0.5.23's DSA decode and DCP helper, reduced: the NoPE path's top-k
# lengths are a local that stays None unless the model has no rope part, then
# passed directly, carried by a dict, or chosen by `None if ... else ...`.
LENGTHS = """
import flashinfer


class Backend:
    def decode(self, q, pages, undecided):
        top_k_lens = None
        if self.qk_rope_head_dim == 0:
            top_k_lens = prepare(pages)
        return flashinfer.decode.trtllm_batch_decode_with_kv_cache_mla(query=q, sparse_mla_top_k_lens=top_k_lens)

    def packed(self, q, pages):
        top_k_lens = None
        if self.qk_rope_head_dim == 0:
            top_k_lens = prepare(pages)
        kwargs = dict(sparse_mla_top_k_lens=top_k_lens)
        return flashinfer.decode.trtllm_batch_decode_with_kv_cache_mla(query=q, **kwargs)

    def chosen(self, q, lens):
        return flashinfer.decode.trtllm_batch_decode_with_kv_cache_mla(
            query=q, sparse_mla_top_k_lens=(None if lens is None else lens[:1])
        )

    def looped(self, q, pages):
        top_k_lens = None
        for top_k_lens in pages:
            pass
        return flashinfer.decode.trtllm_batch_decode_with_kv_cache_mla(query=q, sparse_mla_top_k_lens=top_k_lens)
"""
LENS = frozenset({"sparse_mla_top_k_lens"})
NOPE = "self.qk_rope_head_dim == 0"


def _lens_at(index: RepoIndex, nth: int, conditions: dict[str, bool] | None):
    info = index.by_suffix("engine.lens")
    assert info is not None
    return read_keywords(index, info, _calls(index, "engine.lens")[nth], LENS, conditions)[0]


@pytest.mark.parametrize("nth", [0, 1], ids=["spelled at the call", "carried by a dict"])
def test_a_local_left_none_passes_nothing_and_one_the_path_sets_is_passed(tmp_path, nth):
    index = _tree(tmp_path, {"lens.py": LENGTHS})
    # A model with a rope part: the local is still None where the call runs.
    rope = _lens_at(index, nth, {NOPE: False})
    assert rope.passed == {} and rope.unknown == {}
    # A NoPE model: set on every run of this path.
    nope = _lens_at(index, nth, {NOPE: True})
    assert _passed(nope) == {"sparse_mla_top_k_lens": "top_k_lens"} and nope.unknown == {}
    # Undecided: None on some runs only, never taken as passed.
    bare = _lens_at(index, nth, None)
    assert bare.passed == {} and "None on some runs only" in bare.unknown["sparse_mla_top_k_lens"].why


def test_none_or_a_value_by_a_test_follows_the_paths_decision(tmp_path):
    index = _tree(tmp_path, {"lens.py": LENGTHS})
    assert _lens_at(index, 2, {"lens is None": True}).passed == {}
    assert _passed(_lens_at(index, 2, {"lens is None": False})) == {"sparse_mla_top_k_lens": "lens[:1]"}
    undecided = _lens_at(index, 2, None)
    assert undecided.passed == {} and "test not decided" in undecided.unknown["sparse_mla_top_k_lens"].why


def test_a_local_rebound_otherwise_than_by_assignment_is_not_read_as_none(tmp_path):
    # `for top_k_lens in pages` rebinds it where the walk's locals do not look:
    # the call passes the name, as before any reading of locals.
    index = _tree(tmp_path, {"lens.py": LENGTHS})
    assert _passed(_lens_at(index, 3, None)) == {"sparse_mla_top_k_lens": "top_k_lens"}
