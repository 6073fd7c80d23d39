"""Finding every call of a FlashInfer entry in an engine's tree
(rules/repo/tracing/calls.py): through re-exports and star imports it is
found as the call it is; every other place the entry is handed on is an
escape, listed with its place, never dropped; looking at an entry is neither."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from hprobe.rules.repo.tracing.calls import find_calls
from hprobe.rules.repo.tree.scan import RepoIndex

ENTRY = "trtllm_batch_decode_with_kv_cache_mla"
ENTRIES = frozenset({ENTRY, "trtllm_batch_decode_sparse_mla_dsv4"})
ARGS = (
    "query=q, kv_cache=kv, workspace_buffer=ws, qk_nope_head_dim=128, kv_lora_rank=512, qk_rope_head_dim=64, "
    "block_tables=bt, seq_lens=sl, max_seq_len=msl"
)


def _tree(root: Path, files: dict[str, str]) -> RepoIndex:
    for name, text in {"engine/__init__.py": "", **files}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).replace("ARGS", ARGS))
    return RepoIndex.build(root)


REEXPORTS = {
    # The engine's own module re-exports the entry, renamed.
    "engine/fi.py": f"from flashinfer.decode import {ENTRY} as fi_decode\n__all__ = ['fi_decode']\n",
    # ...and another re-exports that again.
    "engine/fi2.py": "from engine.fi import fi_decode as again\n",
    "engine/star_of_fi.py": "from flashinfer.decode import *\n",
    "engine/a_name.py": """
        from engine.fi import fi_decode

        def forward(q):
            return fi_decode(ARGS)
        """,
    "engine/a_module.py": """
        from engine import fi

        def forward(q):
            return fi.fi_decode(ARGS)
        """,
    "engine/a_dotted_module.py": """
        import engine.fi

        def forward(q):
            return engine.fi.fi_decode(ARGS)
        """,
    "engine/two_hops.py": """
        from engine.fi2 import again as twice

        def forward(q):
            return twice(ARGS)
        """,
    "engine/star_engine.py": """
        from engine.fi import *

        def forward(q):
            return fi_decode(ARGS)
        """,
    "engine/star_flashinfer.py": f"""
        from flashinfer.decode import *

        def forward(q):
            return {ENTRY}(ARGS)
        """,
    "engine/star_of_star.py": f"""
        from engine.star_of_fi import *

        def forward(q):
            return {ENTRY}(ARGS)
        """,
    # A name that only looks like the re-export: not the entry.
    "engine/unrelated.py": """
        from engine.other import fi_decode

        def forward(q):
            return fi_decode(q)
        """,
    "engine/other.py": "def fi_decode(q):\n    return q\n",
}


def test_a_call_through_an_engine_re_export_or_a_star_import_is_found_as_the_entrys(tmp_path):
    sites = find_calls(_tree(tmp_path, REEXPORTS), ENTRIES)
    assert not [s for s in sites if s.escape is not None]
    assert {(s.module, s.function, s.entry) for s in sites} == {
        (module, "forward", ENTRY)
        for module in (
            "engine.a_name",
            "engine.a_module",
            "engine.a_dotted_module",
            "engine.two_hops",
            "engine.star_engine",
            "engine.star_flashinfer",
            "engine.star_of_star",
        )
    }
    # Each with the keywords it passes, as a direct call's.
    assert all("kv_lora_rank" in s.keywords for s in sites)


ESCAPES = {
    "engine/stored.py": f"""
        import flashinfer

        class Layer:
            kernel_in_body = staticmethod(flashinfer.decode.{ENTRY})

            def __init__(self):
                self.kernel = flashinfer.decode.{ENTRY}

            def forward(self, q):
                return self.kernel(ARGS)
        """,
    "engine/handed.py": f"""
        import functools
        from flashinfer.decode import {ENTRY}
        import flashinfer.decode as fd

        KERNELS = [{ENTRY}]

        def run(fn, q):
            return fn(q)

        def through_a_helper(q):
            return run({ENTRY}, q)

        def through_a_keyword(q):
            return functools.partial(func={ENTRY})

        def returned():
            return fd.{ENTRY}

        def through_a_walrus(q):
            return (g := {ENTRY})(ARGS)

        class Mine(fd.{ENTRY}):
            pass
        """,
    "engine/computed.py": """
        import flashinfer.decode

        def __getattr__(name):
            return getattr(flashinfer.decode, name)

        def by_name(name):
            return vars(flashinfer.decode)[name]
        """,
    "engine/looked_at.py": f"""
        import inspect
        from flashinfer.decode import {ENTRY}

        def available() -> bool:
            if {ENTRY} is None or not callable({ENTRY}):
                return False
            return "backend" in inspect.signature({ENTRY}).parameters and bool({ENTRY}.__name__)

        def typed(kernel: {ENTRY}) -> None:
            if {ENTRY}:
                pass
            getattr({ENTRY}, "__doc__")
        """,
}


ANY = "any FlashInfer entry may come out of it; which one, and what it is handed, is not read"


def test_every_other_place_an_entry_is_handed_on_is_an_escape_with_its_place(tmp_path):
    sites = find_calls(_tree(tmp_path, ESCAPES), ENTRIES)
    assert not [s for s in sites if s.escape is None]  # no call here is a call hprobe can follow
    found = {(s.module, s.line, s.function, s.entry, s.escape) for s in sites}
    assert found == {
        ("engine.stored", 5, "Layer", ENTRY, "passed to staticmethod(...)"),
        ("engine.stored", 8, "Layer.__init__", ENTRY, "stored as self.kernel"),
        ("engine.handed", 6, "", ENTRY, "put in a container"),
        ("engine.handed", 12, "through_a_helper", ENTRY, "passed to run(...)"),
        ("engine.handed", 15, "through_a_keyword", ENTRY, "passed as func=..."),
        ("engine.handed", 18, "returned", ENTRY, "returned"),
        ("engine.handed", 21, "through_a_walrus", ENTRY, "bound by g :="),
        ("engine.handed", 23, "", ENTRY, "subclassed by Mine"),
        (
            "engine.computed",
            5,
            "__getattr__",
            "",
            f"an attribute of flashinfer.decode by a computed name (name): {ANY}",
        ),
        ("engine.computed", 8, "by_name", "", f"the namespace of flashinfer.decode (vars): {ANY}"),
    }, sorted(found)
    # Looking at an entry (`is None`, callable, a signature, an annotation, a truth test) hands nothing on.
    assert not any(s.module == "engine.looked_at" for s in sites)


@pytest.mark.parametrize(
    "module",
    [
        # Direct, through a re-export, through a star import of that re-export.
        f"from flashinfer.decode import {ENTRY} as decode",
        "from engine.fi import fi_decode as decode",
        "from engine.star_engine import *\nfrom engine.star_engine import fi_decode as decode",
    ],
)
def test_a_count_the_kernel_refuses_is_broken_however_the_entry_is_imported(cli_json, tmp_path, module):
    """The same call handing 24 heads to trtllm-mla: exit 1 whether the entry
    is imported from flashinfer or through the engine's own re-export."""
    files = {
        "engine/fi.py": REEXPORTS["engine/fi.py"],
        "engine/star_engine.py": "from engine.fi import *\n",
        "engine/attn.py": f"{module}\n\n\ndef forward(q):\n    return decode(ARGS)\n",
    }
    _tree(tmp_path, files)
    mapping = _mapping(tmp_path, "engine.attn:forward")
    code, doc, err = cli_json(
        "check", "--repo", str(tmp_path), "--mapping", str(mapping), "--sm", "100", "--trust-validators"
    )
    (path,) = doc["call_paths"]
    line = module.count("\n") + 5
    assert path["status"] == "judged" and path["site"].endswith(f"engine/attn.py:{line}"), path
    rows = {f["n"]: f["verdict"] for f in doc["findings"]}
    assert rows[24] == "broken" and code == 1, (rows, err)


def test_an_escape_leaves_the_gate_undecided_never_passing(cli_json, cli, tmp_path):
    """The entry stored on the layer and called through the attribute: the call
    is not followed, so every row is assumed (shown on heads // tp) and the gate
    is undecided, exit 3, never 0; a computed name is listed as not judged."""
    files = {"engine/attn.py": ESCAPES["engine/stored.py"], "engine/computed.py": ESCAPES["engine/computed.py"]}
    _tree(tmp_path, files)
    mapping = _mapping(tmp_path, None)
    code, doc, _ = cli_json("check", "--repo", str(tmp_path), "--mapping", str(mapping), "--sm", "100")
    statuses = {(Path(p["site"]).name, p["status"]) for p in doc["call_paths"]}
    assert statuses == {
        ("attn.py:5", "assumed"),
        ("attn.py:8", "assumed"),
        ("computed.py:5", "unresolved"),
        ("computed.py:8", "unresolved"),
    }
    stored = next(p for p in doc["call_paths"] if p["site"].endswith("attn.py:8"))
    assert f"{ENTRY} is stored as self.kernel; the call it leads to is not followed" in stored["detail"]
    assert doc["findings"] and {f["verdict"] for f in doc["findings"]} == {"assumed"}
    assert {f["assumed"] for f in doc["findings"]} == {"escaped"}
    # On the assumed count the kernel refuses 24: said, and still undecided.
    assert any(f["n"] == 24 and f["on_assumption"] == "broken" for f in doc["findings"])
    assert code == 3
    _, out, _ = cli("check", "--repo", str(tmp_path), "--mapping", str(mapping), "--sm", "100")
    assert "the engine hands this entry on where its call is not followed" in out


def _mapping(root: Path, site: str | None) -> Path:
    call = (
        f'[[call]]\nsite = "{site}"\nentry = "{ENTRY}"\nkernel = "trtllm-mla"\nsm = [100]\n' if site is not None else ""
    )
    mapping = root / "mapping.toml"
    mapping.write_text(
        '[mapping]\nmethod = "get_padded_num_q_heads"\n\n'
        '[[model]]\nname = "Dense-96"\nnum_q_heads = 96\ntp = [1, 4]\n\n' + call
    )
    return mapping


def test_a_file_not_read_that_names_flashinfer_is_listed_and_leaves_the_gate_undecided(cli_json, tmp_path):
    """The only broken call, in a module over the size bound: the module is
    searched (not parsed) for FlashInfer's names and listed as not judged:
    exit 3, never 0. A file that names nothing of FlashInfer is passed over
    (a note still says it was not read), as is one parsed fine."""
    from hprobe.system.fileio import MAX_SOURCE_BYTES

    big = "# padding\n" * (MAX_SOURCE_BYTES // 10 + 1)
    files = {
        "engine/attn.py": big + f"from flashinfer.decode import {ENTRY}\n\ndef forward(q):\n    return {ENTRY}(ARGS)\n",
        "engine/broken_syntax.py": f"import flashinfer\n\ndef f(:\n    return flashinfer.decode.{ENTRY}(ARGS)\n",
        "engine/big_and_unrelated.py": big,
    }
    index = _tree(tmp_path, files)
    sites = find_calls(index, ENTRIES)
    assert {(s.path.rsplit("/", 1)[-1], s.line, s.entry) for s in sites} == {
        ("attn.py", 0, ""),
        ("broken_syntax.py", 3, ""),
    }
    by_file = {s.path.rsplit("/", 1)[-1]: s.escape or "" for s in sites}
    assert by_file["attn.py"].startswith("not read (") and "MiB of Python source" in by_file["attn.py"]
    assert by_file["broken_syntax.py"].startswith("not parsed: invalid syntax")
    assert all(e.endswith("it names FlashInfer, so a call in it would go unjudged") for e in by_file.values())

    mapping = _mapping(tmp_path, "engine.attn:forward")
    code, doc, _ = cli_json(
        "check", "--repo", str(tmp_path), "--mapping", str(mapping), "--sm", "100", "--trust-validators"
    )
    assert {(Path(p["site"]).name, p["status"]) for p in doc["call_paths"]} == {
        ("attn.py", "unresolved"),
        ("broken_syntax.py:3", "unresolved"),
    }
    assert code == 3 and doc["exit_code"] == 3
    assert any("big_and_unrelated.py: not read" in note for note in doc["notes"])


def test_a_re_export_chain_longer_than_the_rounds_followed_is_listed_where_it_leaves_off(tmp_path):
    """Each module renames the entry again; the call at the end of a chain
    past MAX_REEXPORT_HOPS is not found as a call, but the import where the
    following stopped is listed (an escape), never passed over."""
    from hprobe.rules.repo.tracing.calls import MAX_REEXPORT_HOPS

    hops = MAX_REEXPORT_HOPS + 3
    files = {"engine/hop0.py": f"from flashinfer.decode import {ENTRY} as name0\n"}
    for i in range(1, hops):
        files[f"engine/hop{i}.py"] = f"from engine.hop{i - 1} import name{i - 1} as name{i}\n"
    files["engine/attn.py"] = (
        f"from engine.hop{hops - 1} import name{hops - 1}\n\ndef forward(q):\n    return name{hops - 1}(ARGS)\n"
    )
    sites = find_calls(_tree(tmp_path, files), ENTRIES)
    assert not [s for s in sites if s.escape is None]  # the call itself is past the horizon
    (stop,) = sites
    assert stop.escape is not None and f"through more than {MAX_REEXPORT_HOPS} modules" in stop.escape
    assert stop.line == 1 and stop.module.startswith("engine.hop")
    # Within the horizon, the same chain is the entry's call.
    short = {f"engine/hop{i}.py": files[f"engine/hop{i}.py"] for i in range(4)}
    short["engine/attn.py"] = "from engine.hop3 import name3\n\ndef forward(q):\n    return name3(ARGS)\n"
    (call,) = find_calls(_tree(tmp_path / "short", short), ENTRIES)
    assert call.escape is None and call.entry == ENTRY


def test_an_entry_as_a_default_a_decorator_or_a_chosen_value_is_an_escape(tmp_path):
    files = {
        "engine/more.py": f"""
            from flashinfer.decode import {ENTRY}

            def with_default(q, kernel={ENTRY}):
                return kernel(q)

            @{ENTRY}
            def decorated():
                pass

            def chosen(q, fast):
                return ({ENTRY} if fast else None)(q)
            """
    }
    sites = find_calls(_tree(tmp_path, files), ENTRIES)
    assert {(s.line, s.escape) for s in sites} == {
        (4, "a parameter's default"),
        (7, "a decorator"),
        (12, "chosen by a conditional expression"),
    }
