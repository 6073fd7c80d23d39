"""The probe never turns "could not tell" into "unsupported", and leaves no trace."""

from __future__ import annotations

import builtins
import gc
import os
import socket

import pytest
import torch

from hprobe.device.session import FlashinferSession
from hprobe.kernels.dsv4_sparse_mla import DSv4SparseMLAProbe
from hprobe.model.outcome import Outcome
from hprobe.model.sm import SM
from hprobe.probe.run import probe_kernel

from ..conftest import V4_PRO_TABLE


class _WrongHeadDimProbe(DSv4SparseMLAProbe):
    """Inputs no release accepts (head dim 500): every call fails a validator
    that has nothing to do with h_q."""

    id = "test-wrong-head-dim"

    def prepare(self, entry, sm, heads, config, alternative=0):
        call = super().prepare(entry, sm, heads, config, alternative)
        call.kwargs["query"] = torch.zeros(1, 1, heads, 500, dtype=torch.bfloat16)
        return call


class _MissingEntryProbe(DSv4SparseMLAProbe):
    id = "test-missing-entry"
    entry_point = "flashinfer.mla._core.no_such_entry_point"


def test_no_boundary_reached_means_inconclusive_not_rejected():
    with FlashinferSession(SM(10, 0)) as session:
        [result] = probe_kernel(session, _WrongHeadDimProbe(), [SM(10, 0)], [8, 16, 24, 64])
    assert {r.outcome for r in result.heads.values()} == {Outcome.INCONCLUSIVE}
    sample = result.heads[64]
    # One check refused every h_q on every SM, and no probed call was ever seen
    # to pass it: that may be the probe's own inputs, so it is no definite answer.
    assert "no probed call was seen to pass" in sample.reason
    assert "head dim" in sample.message  # the validator's words are still shown


def test_missing_entry_point_is_absent():
    with FlashinferSession(SM(10, 0)) as session:
        [result] = probe_kernel(session, _MissingEntryProbe(), [SM(10, 0)], [64])
    assert result.heads[64].outcome is Outcome.ABSENT


def test_jit_arch_check_is_a_validator_and_other_jit_failures_are_not():
    """The arch list JIT-spec generation compiles for is the target's (as the
    device would give it), so its arch check is a real refusal; anything else
    raised in flashinfer's JIT machinery is past the validators: inconclusive."""
    with FlashinferSession(SM(10, 0)) as session:
        import flashinfer.compilation_context as cc
        import flashinfer.jit.core as jit_core

        assert cc.CompilationContext().TARGET_CUDA_ARCHS == {(10, "0a")}
        arch = session.call(SM(10, 0), lambda: jit_core.current_compilation_context.get_nvcc_flags_list([12]))
        assert arch.validator and arch.site is not None and arch.site.function == "get_nvcc_flags_list"
        assert (
            session.call(SM(12, 0), lambda: jit_core.current_compilation_context.get_nvcc_flags_list([12])).error_type
            == "Returned"
        )

        # Ordinary code of the JIT machinery failing (here: a spec with no
        # sources asked for its library) is no check: inconclusive.
        other = session.call(SM(12, 0), lambda: jit_core.JitSpec.get_library_path(None))
    assert other.error_type and not other.validator and other.reason


def _global_state() -> dict:
    return {
        "props": torch.cuda.get_device_properties,
        "cap": torch.cuda.get_device_capability,
        "cuda": torch.version.cuda,
        "import": builtins.__import__,
        "connect": socket.socket.connect,
        "arch": os.environ.get("FLASHINFER_CUDA_ARCH_LIST"),
        "validate": os.environ.get("FLASHINFER_VALIDATE_INPUTS"),
        "collector": (gc.isenabled(), gc.get_freeze_count()),
    }


def test_everything_is_restored_after_a_session():
    before = _global_state()
    with FlashinferSession(SM(12, 0)) as session:
        assert torch.cuda.get_device_capability() == (12, 0)
        import flashinfer.utils as fu

        seen: list = []
        session.call(
            SM(10, 3),
            lambda: seen.extend([torch.cuda.get_device_capability(), fu.get_compute_capability(torch.device("cpu"))]),
        )
        assert seen == [(10, 3), (10, 3)]
    assert _global_state() == before
    import flashinfer.utils as fu

    with pytest.raises(ValueError, match="cuda device"):
        fu.get_compute_capability(torch.device("cpu"))


def test_the_imports_made_leave_the_collectors_scans_while_the_session_lives():
    """Frozen after the import (a full collection while probing scanned them
    all), thawed at close; a host that froze objects of its own keeps its
    freeze, and a collector the host turned off stays off."""
    assert gc.get_freeze_count() == 0
    with FlashinferSession(SM(10, 0)):
        assert gc.get_freeze_count() > 100_000  # torch's and flashinfer's objects
        assert gc.isenabled()
    assert gc.get_freeze_count() == 0

    gc.freeze()
    gc.disable()
    # Made after the host's freeze: a session that froze again would take them
    # in. The count itself may only fall meanwhile (a frozen object the release's
    # import or close lets go of is freed and leaves the count), never rise.
    made_after = [[index] for index in range(20_000)]
    try:
        host = gc.get_freeze_count()
        with FlashinferSession(SM(10, 0)):
            assert host // 2 < gc.get_freeze_count() <= host
            assert not gc.isenabled()
        assert host // 2 < gc.get_freeze_count() <= host  # not thawed, not added to
    finally:
        gc.enable()
        gc.unfreeze()
    assert len(made_after) == 20_000


def test_network_is_refused_during_a_probe():
    with FlashinferSession(SM(10, 0)) as session:
        result = session.call(SM(10, 0), lambda: socket.create_connection(("127.0.0.1", 9)))
    assert not result.reached and result.error_type == "NetworkRefused"


def test_hprobes_own_fetch_beside_a_probe_goes_through():
    """A kernel table fetched from a store in a thread while a release is probed in
    this process: the probe's refusal is for what flashinfer runs, not for hprobe's
    own fetch (own_network). A release's call in the same moment is still refused."""
    import threading

    from hprobe.device.boundary import own_network

    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    outcome: list[str] = []

    def fetch() -> None:
        with own_network():
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
        outcome.append("connected")

    def probe_call() -> None:
        thread = threading.Thread(target=fetch)
        thread.start()
        thread.join(10)
        socket.create_connection(("127.0.0.1", port))  # flashinfer's, in the probe

    try:
        with FlashinferSession(SM(10, 0)) as session:
            result = session.call(SM(10, 0), probe_call)
    finally:
        listener.close()
    assert outcome == ["connected"]
    assert not result.reached and result.error_type == "NetworkRefused"


def _broken_flashinfer(root):
    """A directory whose `flashinfer` fails at import, as a release does beside
    dependencies it was not built for."""
    package = root / "flashinfer"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("raise ImportError('cannot import name cute from cutlass')\n")
    return root


def test_broken_installed_flashinfer_is_one_line_exit_4(tmp_path):
    import subprocess
    import sys

    env = dict(os.environ, PYTHONPATH=str(_broken_flashinfer(tmp_path)), NO_COLOR="1")
    proc = subprocess.run(
        [sys.executable, "-m", "hprobe", "matrix", "--sm", "100"], capture_output=True, text=True, env=env
    )
    assert proc.returncode == 4
    assert proc.stderr.strip() == (
        "hprobe: error: flashinfer failed to import: ImportError: cannot import name cute from cutlass"
    )


def test_release_that_fails_to_import_is_inconclusive_not_rejected(cli_json, tmp_path, monkeypatch):
    monkeypatch.setenv("HPROBE_CACHE_DIR", str(tmp_path / "cache"))
    tree = _broken_flashinfer(tmp_path / "tree")
    code, doc, _ = cli_json("check", "--sm", "100", "--flashinfer", str(tree))
    assert code == 3
    assert {f["verdict"] for f in doc["findings"]} == {"inconclusive"}
    assert "cannot import name cute" in doc["findings"][0]["evidence"]["reason"]


def test_probing_in_two_processes_gives_the_same_results(cli_json, monkeypatch):
    """hprobe.probe.parallel forks after import; the report must not depend on it."""
    # --no-cache: the second run must probe again, not read what the first one cached.
    args = (
        "matrix",
        "-k",
        "trtllm-mla,xqa-mla,sm120-sparse-mla",
        "--sm",
        "100,120",
        "--heads",
        "1-20,96,128,129",
        "--no-cache",
    )
    from hprobe.probe import parallel as probing  # support.gather imports it when it probes

    calls = []
    real = probing.probe_split
    monkeypatch.setattr(probing, "probe_split", lambda *a, **k: calls.append(1) or real(*a, **k))
    monkeypatch.setenv("HPROBE_WORKERS", "1")
    _, one, _ = cli_json(*args)
    probed_once = len(calls)
    monkeypatch.setenv("HPROBE_WORKERS", "2")
    _, two, _ = cli_json(*args)
    assert probed_once and len(calls) == 2 * probed_once, "the second run did not probe"
    assert len(one["results"]) == 14
    assert one["results"] == two["results"]


_WITHOUT = """
import sys
class _Without:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == {module!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, _Without())
from hprobe.cli.app import run
sys.argv = ["hprobe", "check", "--table", {table!r}, "--sm", "100"]
run()
"""


@pytest.mark.parametrize(
    ("module", "line"),
    [
        ("torch", "pip install torch --index-url https://download.pytorch.org/whl/cpu"),
        (
            "flashinfer",
            "pip install flashinfer-python (after a CPU torch), or name a release to fetch with --flashinfer",
        ),
    ],
)
def test_a_missing_torch_or_flashinfer_is_exit_4_with_the_line_that_installs_it(tmp_path, write_table, module, line):
    """Neither is a dependency of hprobe (a serving stack brings its own; the
    index's torch is a CUDA build): without one, a probe says what installs it."""
    import subprocess
    import sys

    table = write_table(V4_PRO_TABLE.format(rule="pad_to = [128]"))

    proc = subprocess.run(
        [sys.executable, "-c", _WITHOUT.format(module=module, table=str(table))],
        env=dict(os.environ, HPROBE_CACHE_DIR=str(tmp_path / "cache"), NO_COLOR="1"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 4, proc.stderr
    [said] = [s for s in proc.stderr.splitlines() if s.startswith("hprobe: error:")]
    assert f"No module named '{module}'; install it: {line}" in said
