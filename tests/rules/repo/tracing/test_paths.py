"""Call paths: every call of a probed FlashInfer entry in an engine's tree,
found with ast and judged or listed (a fixture engine with each construct the
real engines use), against the installed flashinfer."""

from __future__ import annotations

import sys
from pathlib import Path

from hprobe.rules.repo.extract import extract
from hprobe.rules.repo.tracing.calls import find_calls
from hprobe.rules.repo.tree.mapping import load_mapping
from hprobe.rules.repo.tree.scan import RepoIndex

from ....conftest import ROOT
from ..test_extract import _installed_tree

ENGINE = ROOT / "tests" / "fixtures" / "repos" / "callpaths"
MAPPING = ENGINE / "mapping.toml"
ENTRIES = frozenset(
    {"trtllm_batch_decode_with_kv_cache_mla", "trtllm_batch_decode_sparse_mla_dsv4", "BatchMLAPagedAttentionWrapper"}
)


def _engine_with(tmp_path: Path, files: dict[str, str]) -> Path:
    """The fixture engine copied, with `files` (under engine/backends/) added."""
    import shutil

    tree = tmp_path / "engine"
    shutil.copytree(ENGINE, tree)
    for name, text in files.items():
        (tree / "engine" / "backends" / name).write_text(text)
    return tree


def _paths(found) -> dict[str, object]:
    return {Path(p.shown).relative_to(ENGINE).as_posix(): p for p in found.paths.paths}


def test_every_call_is_found_however_it_is_spelled():
    sites = find_calls(RepoIndex.build(ENGINE), ENTRIES)
    found = {(s.path, s.line, s.function, s.entry) for s in sites}
    assert found == {
        # `from flashinfer.decode import X`, X(...)
        ("engine/backends/dense.py", 28, "DenseImpl.forward", "trtllm_batch_decode_with_kv_cache_mla"),
        # `import flashinfer` under try, flashinfer.decode.X(...) in a nested function
        ("engine/backends/sparse.py", 10, "SparseImpl._kernel.run", "trtllm_batch_decode_with_kv_cache_mla"),
        # imported inside the function under another name
        ("engine/backends/sparse.py", 18, "unmapped", "trtllm_batch_decode_with_kv_cache_mla"),
        ("engine/backends/sparse.py", 22, "stale", "trtllm_batch_decode_with_kv_cache_mla"),
        # the engine's own lazy wrapper of the entry, imported from its utils
        ("engine/models/v4.py", 14, "Attention.forward", "trtllm_batch_decode_sparse_mla_dsv4"),
    }
    # `inspect.signature(X)` mentions the entry without calling it: no call path.
    assert not any(s.function == "has_entry" for s in sites)


def test_each_call_is_judged_or_listed_with_why():
    found = extract(ENGINE, load_mapping(MAPPING))
    paths = _paths(found)
    assert {k: p.status.value for k, p in paths.items()} == {
        "engine/backends/dense.py:28": "judged",
        "engine/backends/sparse.py:10": "judged",
        "engine/backends/sparse.py:18": "assumed",
        "engine/backends/sparse.py:22": "unresolved",
        "engine/models/v4.py:14": "judged",
    }
    assert "the mapping does not say what decides its head count" in paths["engine/backends/sparse.py:18"].detail
    # What the mapping says is checked against the call itself.
    assert "it passes backend='xqa', the mapping says 'auto'" in paths["engine/backends/sparse.py:22"].detail
    backends = {b.name: b for b in found.table.backends}
    # The engine's own selector, evaluated per count: 24 and 96 do not tile, 48 does.
    cute = backends["engine.backends.dense.DenseImpl.forward -> backend=cute-dsl"]
    auto = backends["engine.backends.dense.DenseImpl.forward -> backend=auto"]
    assert (cute.counts, dict(cute.options)["backend"]) == ((24, 96), "cute-dsl")
    assert (auto.counts, dict(auto.options)["backend"]) == ((48,), "auto")
    assert cute.models == ("Dense-96",)  # the dense path serves the dense models only
    # Unpadded: each count as it is, with top-k.
    sparse = backends["engine.backends.sparse.SparseImpl._kernel"]
    assert sparse.rule.describe() == "pad_map {24->24, 48->48, 96->96}" and dict(sparse.options)["topk"] == 2048
    # Inline: q_padded is allocated with _PAD heads below 64, unless the pool is FP8 (false here).
    inline = backends["Attention.forward (inline) -> Attention.forward"]
    assert inline.rule.describe() == "pad_map {8->64, 32->64, 128->128}" and inline.models == ("DSv4-Pro",)
    branches = dict(inline.branches)
    assert branches["DSv4-Pro", 8].endswith("engine/models/v4.py:12 [SM100, self.pool_is_fp8=False]")
    assert "q_padded not assigned in Attention.forward: unpadded" in branches["DSv4-Pro", 128]
    assert not any(m == "engine" or m.startswith("engine.") for m in sys.modules)  # read, never imported


# The reading is the subject: a pending compiled selection (0.7.4's kernel
# table is the artifact store's alone) is taken on the validators' word.
TRUSTED = ("--trust-validators",)


def test_check_judges_paths_and_names_those_not_judged(cli_json):
    code, doc, _ = cli_json("check", "--repo", str(ENGINE), "--mapping", str(MAPPING), "--sm", "100", *TRUSTED)
    by = {(f["backend"], f["model"], f["tp"]): f for f in doc["findings"]}
    # 0.6.14's dense trtllm-mla on SM100: the validators take 48 (auto) ...
    assert by["engine.backends.dense.DenseImpl.forward -> backend=auto", "Dense-96", 2]["n"] == 48
    # ... and the inline rule pads DSv4-Pro TP4 (32) to 64, where 0.6.14 takes 32 itself.
    inline = by["Attention.forward (inline) -> Attention.forward", "DSv4-Pro", 4]
    assert (inline["n"], inline["padded"], inline["verdict"], inline["best"]) == (32, 64, "reducible", 32)
    assert inline["source"].endswith("engine/models/v4.py:12 [SM100, self.pool_is_fp8=False]")
    listed = {p["site"].rsplit("callpaths/", 1)[1]: p for p in doc["call_paths"]}
    assert len(listed) == 5 and {p["status"] for p in listed.values()} == {"judged", "assumed", "unresolved"}
    assert listed["engine/backends/sparse.py:18"]["status"] == "assumed"


def test_a_call_no_mapping_names_is_shown_on_an_assumed_count_and_undecided(cli_json, cli, tmp_path):
    """The trail of sparse.py:18's head count ends at the call (no mapping entry
    says what decides it): every model's heads // tp, unpadded, judged with
    what the call passes, marked assumed on every row, never ok and never
    broken; the gate is undecided, and --strict fails on it."""
    code, doc, _ = cli_json("check", "--repo", str(ENGINE), "--mapping", str(MAPPING), "--sm", "100", *TRUSTED)
    assumed = [f for f in doc["findings"] if f["backend"] == "engine.backends.sparse.unmapped:18 [assumed]"]
    assert assumed and {f["verdict"] for f in assumed} == {"assumed"}
    assert {(f["n"], f["padded"]) for f in assumed} == {(n, n) for n in {f["n"] for f in assumed}}  # unpadded
    assert all(
        f["on_assumption"] in ("ok", "reducible", "broken", "some-shapes", "inconclusive", "off-fast-path")
        for f in assumed
    )
    where = f"{ENGINE}/engine/backends/sparse.py:18"
    assert all(
        f["notes"][0].startswith("assumed: the model's heads // tp, unpadded")
        and f"the trail ended at {where}" in f["notes"][0]
        for f in assumed
    )
    assert all(f["kernel"] == "trtllm-mla" for f in assumed)  # the call passes no backend, top-k or buffer
    # Dense-96's sparse path is broken (exit 1); with DSv4-Pro alone the assumed rows decide the gate.
    assert code == 1
    mapping = tmp_path / "mapping.toml"
    mapping.write_text(
        MAPPING.read_text().replace(
            'name = "Dense-96"\nnum_q_heads = 96\ntp = [1, 2, 4]\nfamilies = ["dense"]',
            'name = "Dense-96"\nnum_q_heads = 96\ntp = [1, 2, 4]\nfamilies = ["none-here"]',
        )
    )
    only, doc, _ = cli_json("check", "--repo", str(ENGINE), "--mapping", str(mapping), "--sm", "100", *TRUSTED)
    assert {
        f["verdict"] for f in doc["findings"] if f["model"] == "DSv4-Pro" or not f["backend"].endswith("[assumed]")
    } <= {"ok", "reducible", "assumed"}
    assert not any(f["verdict"] == "broken" for f in doc["findings"]), [
        f for f in doc["findings"] if f["verdict"] == "broken"
    ]
    assert only == 3 and doc["exit_code"] == 3  # reducible passes; assumed is undecided
    strict, doc, _ = cli_json(
        "check", "--repo", str(ENGINE), "--mapping", str(mapping), "--sm", "100", "--strict", *TRUSTED
    )
    assert strict == 1 and any(f["verdict"] == "assumed" for f in doc["findings"])
    _, out, _ = cli("check", "--repo", str(ENGINE), "--mapping", str(mapping), "--sm", "100")
    assert out.rstrip().splitlines()[-1].endswith("1 call path assumed, 1 call path not judged  → exit 3")


def test_text_lists_the_calls_not_judged(cli):
    code, out, _ = cli("check", "--repo", str(ENGINE), "--mapping", str(MAPPING), "--sm", "100")
    assert "call paths  5 calls of FlashInfer entries found, 3 judged, 1 assumed" in out
    assert "engine/backends/sparse.py:18 unmapped → trtllm_batch_decode_with_kv_cache_mla: assumed" in out
    assert "engine/backends/sparse.py:22 stale → trtllm_batch_decode_with_kv_cache_mla: unresolved" in out
    assert out.rstrip().splitlines()[-1].endswith(f"1 call path assumed, 1 call path not judged  → exit {code}")


def test_model_picks_from_the_table_and_its_paths(cli_json):
    installed = _installed_tree()
    code, doc, _ = cli_json(
        "check",
        "--repo",
        str(ROOT / "tests" / "fixtures" / "repos" / "post48047"),
        "--model",
        "Kimi-K3",
        "--sm",
        "100",
        "--flashinfer",
        installed,
    )
    # The DSv4 classes serve the dsv4 family: Kimi K3 takes none of their paths.
    assert doc["findings"] == [] and code == 3
    code, doc, _ = cli_json(
        "check",
        "--repo",
        str(ROOT / "tests" / "fixtures" / "repos" / "post48047"),
        "--model",
        "DeepSeek-V4-Flash",
        "--sm",
        "100",
        "--flashinfer",
        installed,
    )
    assert {f["model"] for f in doc["findings"]} == {"DeepSeek-V4-Flash"} and {f["n"] for f in doc["findings"]} == {
        64,
        32,
        16,
        8,
        4,
    }


def test_an_unknown_model_is_one_line(cli):
    code, out, err = cli("check", "--model", "GPT-5")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("hprobe: error: --model 'GPT-5': not a model hprobe knows (known: DeepSeek-V3,")
    code, _, err = cli("check", "--model", "Kimi-K3", "--heads", "96")
    assert code == 2 and "--model and --heads both choose the models judged" in err


ALIASES = ROOT / "tests" / "fixtures" / "repos" / "aliases"


def test_calls_through_an_alias_getattr_import_module_partial_or_a_table_are_found(cli_json):
    sites = find_calls(RepoIndex.build(ALIASES), ENTRIES)
    assert sorted(s.function for s in sites) == [
        "through_a_local_alias",
        "through_a_module_alias",
        "through_a_table",
        "through_getattr",
        "through_import_module",
        "through_partial",
    ]
    # None is dropped: with no mapping entry each is shown on an assumed count,
    # with the keywords it passes (the partial's backend among them).
    code, doc, err = cli_json(
        "check", "--repo", str(ALIASES), "--mapping", str(ALIASES / "mapping.toml"), "--sm", "100"
    )
    assert {p["function"]: p["status"] for p in doc["call_paths"]} == dict.fromkeys(
        (s.function for s in sites), "assumed"
    )
    kernels = {f["backend"].split(":")[0].rsplit(".", 1)[1]: f["kernel"] for f in doc["findings"]}
    assert kernels["through_partial"] == "trtllm-mla[backend=trtllm-gen]" and kernels["through_getattr"] == "trtllm-mla"
    assert {f["verdict"] for f in doc["findings"]} == {"assumed"} and code == 3, err


def test_an_inline_padding_to_one_constant_is_rewritten_by_that_constant(cli, cli_json, tmp_path):
    """The fixture's Attention.forward pads below `_PAD = 64` to 64 (DSpark's
    `_PAD_NUM_HEADS` in SGLang). On a release that takes every DSv4-Pro count as
    it is, the patch is that one literal (0: no count is below it), checked by
    reading the tree again before it is written; `check` on the patched tree
    then finds the inline path padding nothing."""
    import shutil
    import subprocess

    tree = tmp_path / "engine"
    shutil.copytree(ENGINE, tree)
    # One release, whose kernel table is at hand: every answer the patch rests on is decided here.
    (tree / "pyproject.toml").write_text(
        (tree / "pyproject.toml").read_text().replace("flashinfer-python>=0.6.14", "flashinfer-python==0.6.14")
    )
    diff = tmp_path / "fix.diff"
    code, out, err = cli("suggest", "--repo", str(tree), "--mapping", str(MAPPING), "--sm", "100", "--diff", str(diff))
    assert code in (0, 1, 3) and diff.exists(), err
    text = diff.read_text()
    assert "-_PAD = 64\n+_PAD = 0\n" in text and text.count("+++ b/engine/models/v4.py") == 1
    said = " ".join(out.split())
    changed = "engine/models/v4.py:3: _PAD → 0: no count is below it, so none is padded (no padding, as suggested)"
    assert changed in said
    subprocess.run(["git", "apply", str(diff)], cwd=tree, check=True)
    _, doc, _ = cli_json("check", "--repo", str(tree), "--mapping", str(MAPPING), "--sm", "100")
    inline = [f for f in doc["findings"] if f["backend"].startswith("Attention.forward (inline)")]
    assert {(f["n"], f["padded"], f["verdict"]) for f in inline} == {(128, 128, "ok"), (32, 32, "ok"), (8, 8, "ok")}


def test_an_inline_padding_constant_read_elsewhere_is_not_rewritten(tmp_path):
    """A constant another function also reads: a new value would change code
    no one judged, so the inline padding is the reader's to change."""
    from hprobe.rules.repo.interpreter.inline import find_inline, floor_constant
    from hprobe.rules.repo.tree.mapping import InlineRule

    models = tmp_path / "engine" / "models"
    models.mkdir(parents=True)
    (tmp_path / "engine" / "__init__.py").write_text("")
    (models / "__init__.py").write_text("")
    (models / "v4.py").write_text(
        "_PAD = 64\n\n\nclass Attention:\n    def forward(self, x):\n        q_padded = None\n"
        "        if self.n_local_heads < _PAD:\n            q_padded = x.new_empty(x.shape[0], _PAD, 512)\n"
        "        return q_padded\n\n\ndef workspace():\n    return _PAD * 4\n"
    )
    index = RepoIndex.build(tmp_path)
    rule = InlineRule("Attention.forward", "q_padded", 1)
    site = find_inline(index, rule)
    assert not isinstance(site, str)
    assert (
        floor_constant(index, site, rule)
        == "_PAD (engine/models/v4.py:1) is read elsewhere too (engine/models/v4.py:13)"
    )
    (models / "v4.py").write_text((models / "v4.py").read_text().replace("return _PAD * 4", "return 256"))
    index = RepoIndex.build(tmp_path)
    site = find_inline(index, rule)
    assert not isinstance(site, str)
    found = floor_constant(index, site, rule)
    assert not isinstance(found, str) and (found.name, found.literal.value, found.literal.lineno) == ("_PAD", 64, 1)


def test_the_backend_probed_is_the_one_the_calls_pass():
    """The mapping keeps only what code cannot show: a backend every call
    passes as one literal is probed; none where no call passes one (the entry's
    default runs, whatever the mapping says); the mapping's where the calls
    disagree or cannot be read, and never one a probe has no axis for."""
    from hprobe.model.call import CallForm
    from hprobe.rules.repo.tracing.paths import options_from_calls

    entry = "trtllm_batch_decode_sparse_mla_dsv4"
    none = CallForm(entry, "a.py:1", 4, ())
    literal = CallForm(entry, "a.py:2", 0, ("backend",), literals=(("backend", "trtllm-gen"),))
    unread = CallForm(entry, "a.py:3", 0, (), unknown="**kw is not a dict hprobe can read")
    mapped = (("backend", "trtllm-gen"),)
    assert options_from_calls("dsv4-sparse-mla", mapped, (none,)) == ()
    assert options_from_calls("dsv4-sparse-mla", (), (literal,)) == mapped
    assert options_from_calls("dsv4-sparse-mla", (("backend", "auto"),), (none, literal)) == (("backend", "auto"),)
    assert options_from_calls("dsv4-sparse-mla", mapped, (unread,)) == mapped
    assert options_from_calls("dsv4-sparse-mla", mapped, (none,), picked=True) == mapped
    assert options_from_calls("sm120-sparse-mla", (), (literal,)) == ()


def test_a_call_path_whose_inline_padding_reads_flashinfer_is_read_per_release_and_its_crash_is_broken(
    cli_json, tmp_path
):
    """The inline padding asks an engine helper that iterates 0.7.0.post1's
    decode dispatch envelope (it answers `in` only): the path is read again
    against the release judged (never left not evaluable for want of one),
    and every count whose branch asks the helper is broken at the helper's
    line, while a count that never asks it is judged by the kernel."""
    import shutil

    tree = tmp_path / "engine"
    shutil.copytree(ENGINE, tree)
    (tree / "engine" / "caps.py").write_text(
        "def supported():\n"
        "    from flashinfer.mla._sparse_mla_sm120 import _DECODE_DSV4_DISPATCH\n\n"
        "    return frozenset(heads for heads, _ in _DECODE_DSV4_DISPATCH)\n"
    )
    model = tree / "engine" / "models" / "v4.py"
    model.write_text(
        model.read_text()
        .replace("from engine.utils", "from engine.caps import supported\nfrom engine.utils")
        .replace(
            "elif self.n_local_heads < _PAD:",
            "elif self.n_local_heads < _PAD and self.n_local_heads not in supported():",
        )
    )
    argv = ["check", "--repo", str(tree), "--mapping", str(tree / "mapping.toml"), "--sm", "100"]
    code, doc, _ = cli_json(*argv, "--flashinfer", "0.7.0.post1")
    rows = {f["n"]: f for f in doc["findings"] if f["backend"].startswith("Attention.forward (inline)")}
    crash = (
        f"the engine's code raises TypeError at {tree}/engine/caps.py:4: "
        "'_DecodeDispatchEnvelope' object is not iterable"
    )
    assert {n: (f["verdict"], f["crash"]) for n, f in rows.items() if n < 64} == {
        n: ("broken", crash) for n in rows if n < 64
    }
    assert rows[128]["crash"] is None  # n >= 64 never asks the helper
    [path] = [p for p in doc["call_paths"] if "engine/models/v4.py:" in p["site"]]
    assert path["status"] == "judged", path
    assert code == 1


def test_names_called_from_flashinfers_mla_code_that_no_probe_answers_for_are_said(tmp_path):
    """A planning entry of an MLA module (cake's `plan_attention`), a concat op
    under another name: called, not probed, so their calls are not judged —
    said in one note with where each is imported. A constant the engine reads
    (a dispatch table) and a name imported but never called are not calls."""
    cake = (
        "from flashinfer.mla.cake_kimi_k3_mla import plan_attention, workspace_bytes\n"
        "from flashinfer.mla._sparse_mla_sm120 import _DECODE_MAX_TOKENS\n"
        "from flashinfer.concat_ops import concat_mla_k as cat\n\n\n"
        "def plan(batch, heads):\n"
        "    cat(None, None, None)\n"
        "    return plan_attention(batch=batch, num_heads=heads, max_seq_len=_DECODE_MAX_TOKENS)\n"
    )
    found = extract(_engine_with(tmp_path, {"cake.py": cake}), load_mapping(MAPPING))
    [note] = [n for n in found.notes if n.startswith("not probed:")]
    assert note.startswith("not probed: 2 name(s)")
    assert "flashinfer.mla.cake_kimi_k3_mla.plan_attention (cake.py:1)" in note
    assert "flashinfer.concat_ops.concat_mla_k (cake.py:3)" in note
    assert "workspace_bytes" not in note and "_DECODE_MAX_TOKENS" not in note
    # The fixture's own calls are all of probed entries: nothing said there.
    assert not [n for n in extract(ENGINE, load_mapping(MAPPING)).notes if n.startswith("not probed:")]


def test_gqa_calls_whose_engine_reading_is_not_built_are_said_and_take_no_part_in_the_gate(tmp_path):
    """The GQA/MHA entries hprobe probes (trtllm-gen decode and context, the
    CUDA-core decode wrapper) but whose engine calls it does not read: each call
    found however it is spelled (here a direct import, a module attribute and an
    engine re-export), said in one note with its place and the probe that
    answers for the kernel; no call path, no verdict."""
    gqa = (
        "import flashinfer\n"
        "from flashinfer.decode import trtllm_batch_decode_with_kv_cache\n"
        "from flashinfer.prefill import trtllm_batch_context_with_kv_cache as context\n\n\n"
        "def decode(q, kv):\n"
        "    return trtllm_batch_decode_with_kv_cache(q, kv)\n\n\n"
        "def prefill(q, kv):\n"
        "    wrapper = flashinfer.BatchDecodeWithPagedKVCacheWrapper(None)\n"
        "    return context(q, kv), wrapper\n"
    )
    reexport = (
        "from engine.backends.gqa import trtllm_batch_decode_with_kv_cache as again\n\n\n"
        "def run(q, kv):\n"
        "    return again(q, kv)\n"
    )
    baseline = extract(ENGINE, load_mapping(MAPPING))
    found = extract(_engine_with(tmp_path, {"gqa.py": gqa, "reexport.py": reexport}), load_mapping(MAPPING))
    [note] = [n for n in found.notes if n.startswith("not judged: ")]
    assert note.startswith("not judged: 4 call(s) of FlashInfer's GQA/MHA entries")
    assert "BatchDecodeWithPagedKVCacheWrapper (gqa.py:11; `hprobe matrix -k gqa-decode`)" in note
    assert "trtllm_batch_context_with_kv_cache (gqa.py:12; `hprobe matrix -k gqa-trtllm-context`)" in note
    assert "trtllm_batch_decode_with_kv_cache (gqa.py:7, reexport.py:5; `hprobe matrix -k gqa-trtllm-decode`)" in note
    assert len(found.paths.paths) == len(baseline.paths.paths)
    assert not [n for n in baseline.notes if n.startswith("not judged: ")]


def test_the_gqa_note_names_the_models_of_the_table_the_tree_registers(tmp_path):
    """Beside the GQA/MHA calls it does not read, the note names the GQA/MHA
    models of hprobe's table whose architecture the tree's registry names (here
    a vLLM-shaped registry with Llama and Qwen3-MoE), pointing at `matrix
    --model`; a tree without a registry names none."""
    gqa = "from flashinfer.decode import trtllm_batch_decode_with_kv_cache\n\n\ndef decode(q, kv):\n"
    gqa += "    return trtllm_batch_decode_with_kv_cache(q, kv)\n"
    tree = _engine_with(tmp_path, {"gqa.py": gqa})
    [note] = [n for n in extract(tree, load_mapping(MAPPING)).notes if n.startswith("not judged: ")]
    assert "models of hprobe's table" not in note
    registry = tree / "engine" / "model_executor" / "models" / "registry.py"
    registry.parent.mkdir(parents=True)
    registry.write_text(
        '_TEXT_GENERATION_MODELS = {\n    "LlamaForCausalLM": ("llama", "LlamaForCausalLM"),\n'
        '    "Qwen3MoeForCausalLM": ("qwen3_moe", "Qwen3MoeForCausalLM"),\n}\n'
    )
    [note] = [n for n in extract(tree, load_mapping(MAPPING)).notes if n.startswith("not judged: ")]
    assert note.endswith(
        "; the GQA/MHA models of hprobe's table this tree registers: Llama-3.1-8B, Llama-3.2-3B, Llama-3.1-70B, "
        "Llama-3.1-405B, Qwen3-30B-A3B, Qwen3-235B-A22B (`hprobe matrix -k KERNEL --model NAME` answers one at its "
        "shapes per rank)"
    )
