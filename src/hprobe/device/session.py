"""Load the installed flashinfer on any machine and stop its calls at the launch boundary.

A probe runs flashinfer's own Python code with small CPU tensors while the
device queries flashinfer makes answer for a *target* GPU. Every call into
compiled code goes through a stand-in module: calling one of its functions
raises `BoundaryReached`, which proves that every Python validator before the
launch accepted the input. Everything patched is restored on `close()`.
"""

from __future__ import annotations

import builtins
import gc
import os
import shutil
import socket
import sys
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from hprobe.device.boundary import (
    SERVICE_SPECS,
    SPEC_LOADERS,
    BoundaryReached,
    CompiledEntry,
    ImportFailure,
    NetworkRefused,
    Policy,
    StandInModule,
    artefact_boundary,
    artefact_stand_in,
    do_nothing,
    loader_label,
    network_guard,
)
from hprobe.device.classify import CallResult, classify, one_line
from hprobe.device.fakes import FakeDeviceProperties
from hprobe.model.errors import EnvironmentProblem
from hprobe.model.sm import SM
from hprobe.system import collector
from hprobe.system.lifetime import scratch_dir


@dataclass
class _Patch:
    owner: Any
    name: str
    old: Any
    had: bool


# The SM flashinfer is imported under, whatever a run asks about: an import
# that reads the device must not make one SM's answers depend on which other
# SMs the run probes (each call then retargets the faked GPU).
IMPORT_SM = SM(10, 0)

# The CUDA toolkit every probe assumes, whatever this machine has (a CPU
# torch has none; nvcc may or may not be installed): answers are cached
# without it, so they must not depend on it. A JIT check that refuses this
# toolkit is made again under NEWER_TOOLKIT (see `newer_toolkit`).
BASELINE_TOOLKIT = "13.0"
NEWER_TOOLKIT = "99.0"


@dataclass
class _TargetState:
    sm: SM
    toolkit: str = BASELINE_TOOLKIT


def _module_file_prefix(module: ModuleType) -> str:
    return str(Path(module.__file__).resolve().parent) + os.sep  # type: ignore[arg-type]


class FlashinferSession:
    """Imports flashinfer once and probes it for one or more target SMs.

    Use as a context manager; `target(sm)` switches the faked GPU.
    """

    def __init__(self, import_sm: SM = IMPORT_SM):
        self._state = _TargetState(import_sm)
        self._patches: list[_Patch] = []
        self._env_saved: dict[str, str | None] = {}
        self._replacements: dict[int, Any] = {}  # id(original) -> fake
        self._originals: list[Any] = []  # keeps ids stable while the session lives
        self._looked_at: set[str] = set()  # module names _patch_new_modules has seen
        # The import hook runs in every thread of the run (compiled depth is
        # worked out beside the probe and imports as it goes): one patcher at a
        # time, so no thread takes a module as looked at before its fakes are in.
        self._patching = threading.RLock()
        self._scanning = False
        self._cache_clears: list[Callable[[], None]] = []
        self.flashinfer: ModuleType | None = None
        self.torch: ModuleType | None = None
        self._fi_prefix = ""
        self._real_import = builtins.__import__
        self._open = False
        self._froze = False  # this session froze the collector's objects (open), thawed at close
        self._workdir = ""
        self._policy = Policy()
        self._modules_seen = -1
        self._cute_patched = False
        self._tvm_patched = False
        self._spec_patched: set[tuple[type, str]] = set()
        self._fakes_by_module: dict[str, dict[str, Callable[..., Any]]] = {}
        self._contexts: list[Any] = []  # flashinfer's CompilationContext instances
        self._archs_by_sm: dict[SM, Any] = {}  # their TARGET_CUDA_ARCHS as on each target
        self._initializing = False
        # JIT checks seen refusing the baseline toolkit: whether each tests the
        # toolkit (passes under a newer one), found once per check.
        self.toolkit_checks: dict[Any, bool] = {}

    # -- lifecycle -----------------------------------------------------------------

    def __enter__(self) -> FlashinferSession:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def open(self) -> None:
        try:
            os.getcwd()
        except FileNotFoundError:
            # torch cannot load from a working directory removed under the run
            # (MKL ends the process: "Cannot load libtorch_cpu.so"). Every path
            # the run reads or writes was made absolute or refused before any
            # probe (cli/run.py); an empty directory of the run's own stands in,
            # so that a relative path met later finds nothing rather than another file.
            os.chdir(scratch_dir(None, "hprobe-cwd"))
        try:
            with collector.paused():
                import torch
        except Exception as exc:  # noqa: BLE001
            raise EnvironmentProblem(
                f"torch is not importable: {type(exc).__name__}: {exc}{_install_hint(exc, 'torch')}"
            ) from None
        self.torch = torch
        self._open = True
        # Probe tensors are tiny; one intra-op thread also keeps a forked
        # worker (hprobe.probe.parallel) clear of an OpenMP pool started before fork.
        self._threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            self._install_torch_fakes(torch)
            self._target_arch_list(self._state.sm)
            # JIT-spec generation writes generated sources under flashinfer's
            # workspace: a directory of this session's, never the user's cache.
            self._workdir = str(scratch_dir(None, "hprobe-flashinfer"))
            self._set_env("FLASHINFER_WORKSPACE_BASE", self._workdir)
            self._set_env("FLASHINFER_CUBIN_DIR", os.path.join(self._workdir, "cubins"))
            # cutlass-dsl (imported by flashinfer) keeps an IR cache under TMPDIR
            # or CUTE_DSL_CACHE_DIR: in the session's directory too, removed at close.
            self._set_env("CUTE_DSL_CACHE_DIR", os.path.join(self._workdir, "cute-dsl"))
            self._set_env("TMPDIR", self._workdir)
            # Turns on flashinfer's optional host-side checks: more validators run.
            self._set_env("FLASHINFER_VALIDATE_INPUTS", "1")
            self._set_env("FLASHINFER_LOGLEVEL", "0")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    with collector.paused():
                        import flashinfer
                except Exception as exc:  # noqa: BLE001
                    raise EnvironmentProblem(
                        f"flashinfer failed to import: {type(exc).__name__}: {one_line(exc)}"
                        f"{_install_hint(exc, 'flashinfer')}"
                    ) from None
                # What the imports made lives as long as the session: out of the
                # collector's scans (each full collection while probing took
                # 0.14 s to scan it), and a forked prober no longer copies the
                # pages a collection would touch. A host that froze objects of
                # its own keeps its policy; close() thaws what this froze.
                if gc.get_freeze_count() == 0:
                    gc.freeze()
                    self._froze = True
            self.flashinfer = flashinfer
            self._fi_prefix = _module_file_prefix(flashinfer)
            self._install_flashinfer_fakes()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if not self._open:
            return
        self._clear_caches()
        if self._froze:
            gc.unfreeze()
            self._froze = False
        for patch in reversed(self._patches):
            if patch.had:
                setattr(patch.owner, patch.name, patch.old)
            else:
                try:
                    delattr(patch.owner, patch.name)
                except AttributeError:
                    pass
        self._patches.clear()
        self._cute_patched = False
        self._tvm_patched = False
        self._spec_patched.clear()
        self._contexts.clear()
        self._archs_by_sm.clear()
        if self.torch is not None:
            self.torch.set_num_threads(self._threads)
        for key, value in self._env_saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        self._env_saved.clear()
        if self._workdir:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = ""
        self._open = False

    # -- public --------------------------------------------------------------------

    @property
    def version(self) -> str:
        assert self.flashinfer is not None
        return str(getattr(self.flashinfer, "__version__", "unknown"))

    @property
    def location(self) -> str:
        assert self.flashinfer is not None
        return str(Path(self.flashinfer.__file__ or ".").resolve().parent)

    def _target(self, sm: SM) -> None:
        """Make every device query answer for `sm` (each call names its SM)."""
        if sm != self._state.sm:
            self._state.sm = sm
            self._target_arch_list(sm)
            self._clear_caches()

    @contextmanager
    def newer_toolkit(self) -> Iterator[None]:
        """Every toolkit query answers NEWER_TOOLKIT for the span of the
        context: a JIT check that refused BASELINE_TOOLKIT and passes this one
        tests the toolkit, which is the serving machine's, not the kernel's."""
        assert self.torch is not None
        self._state.toolkit = NEWER_TOOLKIT
        self.torch.version.cuda = NEWER_TOOLKIT
        self._clear_caches()
        try:
            yield
        finally:
            self._state.toolkit = BASELINE_TOOLKIT
            self.torch.version.cuda = BASELINE_TOOLKIT
            self._clear_caches()

    @staticmethod
    def quiet() -> Any:
        """Silence flashinfer's warnings for a sweep of calls (entering
        catch_warnings per call costs more than some calls)."""
        return _Quiet()

    def configure(
        self, pass_through: tuple[str, ...] = (), recorded: tuple[str, ...] = (), launches: tuple[str, ...] = ()
    ) -> None:
        """Set the compiled functions the next calls let through because Python
        only passes their result on, those whose arguments are kept as well,
        and the launches that carry their own arguments (see `Policy`)."""
        self._policy.pass_through = frozenset(pass_through)
        self._policy.recorded = frozenset(recorded)
        self._policy.launches = frozenset(launches)
        self._clear_caches()

    def resolve(self, dotted: str) -> Any | None:
        """`flashinfer.mla._core.fn` -> the object, or None when this release lacks it.

        Only a module that does not exist, or a missing attribute, means "lacks
        it". A module that exists but fails to import is this environment's
        problem (a missing optional dependency, say): `ImportFailure`.
        """
        import importlib

        module_name, _, attr = dotted.rpartition(".")
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:  # noqa: BLE001 - any failure while importing is the environment's
            missing = getattr(exc, "name", None) if isinstance(exc, ModuleNotFoundError) else None
            if missing and (module_name == missing or module_name.startswith(missing + ".")):
                return None
            raise ImportFailure(f"{module_name} failed to import: {type(exc).__name__}: {one_line(exc)}") from None
        finally:
            self._patch_new_modules()
        return getattr(module, attr, None)

    def call(
        self, sm: SM, fn: Callable[..., Any], *args: Any, trace: tuple[str, str] | None = None, **kwargs: Any
    ) -> CallResult:
        """Run one probe call on the faked `sm` and say how it ended.

        `trace` = (code filename, function name): record which lines of that
        function ran (`CallResult.lines_run`), to see whether a check that
        refused on one SM was consulted, and passed, on another.
        """
        # Caches are cleared when the target or the policy changes, not per
        # call: within one target they memoize by argument, which is harmless.
        self._target(sm)
        self._policy.passed = []
        self._policy.handed = []
        lines: set[int] = set()
        if trace is not None:
            sys.settrace(_line_tracer(trace, lines))
        try:
            fn(*args, **kwargs)  # warnings: silenced by the caller, once per sweep (see quiet())
        except BoundaryReached as hit:
            result = CallResult(entry=hit.entry, passed=tuple(self._policy.passed))
        except NetworkRefused as refused:
            result = CallResult(
                error_type="NetworkRefused",
                message=str(refused),
                reason="the call tried to reach the network before any launch",
            )
        except Exception as exc:  # noqa: BLE001 - every failure is classified below
            result = classify(exc, self._fi_prefix)
        else:
            result = CallResult(
                error_type="Returned",
                message="the call returned without reaching a compiled function",
                reason="no launch boundary was hit, so the probe cannot see the kernel",
            )
        finally:
            if trace is not None:
                sys.settrace(None)
        if trace is not None:
            result.lines_run = frozenset(lines)
        return result

    # -- patching ------------------------------------------------------------------

    def _set_attr(self, owner: Any, name: str, value: Any) -> None:
        had = hasattr(owner, name)
        self._patches.append(_Patch(owner, name, getattr(owner, name, None), had))
        setattr(owner, name, value)

    def _set_env(self, key: str, value: str) -> None:
        self._env_saved.setdefault(key, os.environ.get(key))
        os.environ[key] = value

    def _install_torch_fakes(self, torch: ModuleType) -> None:
        state = self._state

        def get_device_properties(device: Any = None) -> FakeDeviceProperties:
            return FakeDeviceProperties(state.sm)

        def get_device_capability(device: Any = None) -> tuple[int, int]:
            return (state.sm.major, state.sm.minor)

        def get_device_name(device: Any = None) -> str:
            return f"hprobe target {state.sm}"

        cuda = torch.cuda
        self._set_attr(cuda, "get_device_properties", get_device_properties)
        self._set_attr(cuda, "get_device_capability", get_device_capability)
        self._set_attr(cuda, "get_device_name", get_device_name)
        self._set_attr(cuda, "current_device", lambda: 0)
        self._set_attr(cuda, "is_current_stream_capturing", lambda: False)
        # Wrappers stage plans in pinned host memory, which needs a CUDA driver:
        # it is made in plain host memory, and reads as pinned where the
        # release checks (0.7.x's batch MLA proxy: "page_locked_workspace must
        # be a pinned, contiguous CPU tensor"), as it is on the GPU machine.
        real_empty, real_is_pinned = torch.empty, torch.Tensor.is_pinned
        pinned: set[int] = set()

        def empty(*args: Any, **kwargs: Any) -> Any:
            pin = bool(kwargs.pop("pin_memory", False))
            # A default-device context (device/fake_cuda.py) names its factories
            # by identity, and this stand-in is not one of them: pass it on.
            kwargs.setdefault("device", torch.get_default_device())
            tensor = real_empty(*args, **kwargs)
            if pin and tensor.device.type == "cpu":
                pinned.add(tensor.untyped_storage().data_ptr())
            return tensor

        def is_pinned(tensor: Any, *args: Any, **kwargs: Any) -> bool:
            if tensor.device.type == "cpu" and tensor.untyped_storage().data_ptr() in pinned:
                return True
            return bool(real_is_pinned(tensor, *args, **kwargs))

        self._set_attr(torch, "empty", empty)
        self._set_attr(torch.Tensor, "is_pinned", is_pinned)
        # SM12x gates compare torch.version.cuda with 12.8/12.9; a CPU build has
        # None. The toolkit is the session's, never this machine's (see BASELINE_TOOLKIT).
        self._set_attr(torch.version, "cuda", self._state.toolkit)
        # Network access during a probe means a download of kernels or metadata:
        # refuse it, so such a call is reported instead of hanging or fetching.
        self._set_attr(socket.socket, "connect", network_guard(socket.socket.connect))
        self._set_attr(socket, "create_connection", network_guard(socket.create_connection))
        self._set_attr(socket, "getaddrinfo", network_guard(socket.getaddrinfo))
        self._set_attr(builtins, "__import__", self._import_hook)

    def _install_flashinfer_fakes(self) -> None:
        state = self._state

        def get_compute_capability(device: Any = None) -> tuple[int, int]:
            return (state.sm.major, state.sm.minor)

        def get_cuda_version() -> Any:
            # flashinfer asks nvcc (then torch) for the toolkit: answered by the session.
            from packaging.version import Version

            return Version(state.toolkit)

        # Functions replaced wherever flashinfer binds them, by module, once the
        # module is imported (some releases import these lazily):
        # - the compute capability every Python arch check reads;
        # - `setup_cubin_loader`, which registers compiled cubins with a loaded
        #   library (ctypes): a compiled artefact that exists only past the boundary;
        # - prebuilt cubins and their metadata, fetched while a module is prepared
        #   (trtllm-gen): the first compiled artefact such a getter needs.
        self._fakes_by_module = {
            "flashinfer.utils": {"get_compute_capability": get_compute_capability},
            "flashinfer.jit.cpp_ext": {"get_cuda_version": get_cuda_version},
            "flashinfer.jit.cubin_loader": {
                "setup_cubin_loader": do_nothing,
                "get_artifact": artefact_stand_in,
                "get_cubin": artefact_stand_in,
                "download_file": artefact_boundary,
            },
        }
        self._patch_new_modules()

    def _patch_spec_loaders(self) -> None:
        """Every JitSpec class (0.7.x has subclasses that override the loaders)
        hands back a stand-in module instead of building or loading one."""
        jit_core = sys.modules.get("flashinfer.jit.core")
        spec_cls = getattr(jit_core, "JitSpec", None)
        if spec_cls is None:
            return
        policy = self._policy

        def load(spec: Any, *args: Any, **kwargs: Any) -> Any:
            name = str(getattr(spec, "name", "jit"))
            module = StandInModule(loader_label(name), policy, service=name in SERVICE_SPECS)
            # The release's own Python over a loaded module (0.7.x's batch MLA
            # proxy checks its workspaces, then calls the compiled plan): it
            # runs, so the boundary stays at the compiled call behind it.
            adapter = getattr(spec, "post_load_adapter", None)
            return adapter(module) if callable(adapter) and name not in SERVICE_SPECS else module

        pending, seen = [spec_cls], set()
        while pending:
            cls = pending.pop()
            if cls in seen:
                continue
            seen.add(cls)
            pending.extend(cls.__subclasses__())
            for method in SPEC_LOADERS:
                if method in vars(cls) and (cls, method) not in self._spec_patched:
                    self._spec_patched.add((cls, method))
                    self._set_attr(cls, method, load)
        tvm_ffi = sys.modules.get("tvm_ffi")
        if tvm_ffi is not None and callable(getattr(tvm_ffi, "load_module", None)) and not self._tvm_patched:
            self._tvm_patched = True

            def load_module(path: Any, *args: Any, **kwargs: Any) -> StandInModule:
                return StandInModule(f"tvm_ffi.load_module({Path(str(path)).name})", policy)

            self._set_attr(tvm_ffi, "load_module", load_module)

    def _target_arch_list(self, sm: SM) -> None:
        """Make the arch list flashinfer compiles for the target's, as on that GPU
        (JIT-spec generation checks it: `supported_major_versions`): the
        environment for contexts made from now on, and every context made at
        import (flashinfer reads the list once, into `TARGET_CUDA_ARCHS`)."""
        self._set_env("FLASHINFER_CUDA_ARCH_LIST", sm.arch)
        if not self._contexts:
            return
        if sm not in self._archs_by_sm:
            try:
                self._archs_by_sm[sm] = type(self._contexts[0])().TARGET_CUDA_ARCHS
            except Exception:  # noqa: BLE001 - e.g. "SM 12.x requires CUDA >= 12.9": the JIT check will say so
                self._archs_by_sm[sm] = set()
        for context in self._contexts:
            self._set_attr(context, "TARGET_CUDA_ARCHS", self._archs_by_sm[sm])

    def _find_contexts(self, modules: list[tuple[str, ModuleType]]) -> None:
        """Remember the CompilationContext instances newly imported modules hold."""
        ctx_cls = getattr(sys.modules.get("flashinfer.compilation_context"), "CompilationContext", None)
        if ctx_cls is None:
            return
        found = [
            v
            for _, mod in modules
            for v in vars(mod).values()
            if isinstance(v, ctx_cls) and hasattr(v, "TARGET_CUDA_ARCHS")
        ]
        new = [c for c in found if not any(c is known for known in self._contexts)]
        if new:
            self._contexts.extend(new)
            self._target_arch_list(self._state.sm)

    def _register(self, original: Any, fake: Any) -> None:
        self._originals.append(original)
        self._replacements[id(original)] = fake

    def _patch_new_modules(self) -> None:
        """Patch modules of flashinfer imported since the last look.

        Names are matched by the function object, not the name, because
        releases import `get_compute_capability` under other names.
        """
        # Called on every import statement (flashinfer imports inside functions):
        # nothing new unless sys.modules grew or a module was still executing.
        if len(sys.modules) == self._modules_seen and not self._initializing:
            return
        with self._patching:
            if self._scanning:
                return  # an import of this thread's own scan: the scan looks again when done
            self._scanning = True
            try:
                while True:
                    seen = len(sys.modules)
                    if seen == self._modules_seen and not self._initializing:
                        return  # another thread patched them while this one waited
                    self._initializing = self._scan_and_patch()
                    # Set last: until every module counted here is patched,
                    # another thread's import hook sees a change and waits.
                    self._modules_seen = seen
                    if len(sys.modules) == seen:
                        return
            finally:
                self._scanning = False

    def _scan_and_patch(self) -> bool:
        """Patch the flashinfer modules not looked at yet; whether one was
        still executing (to be looked at again)."""
        self._patch_cute_compile()
        fresh = []
        initializing = False
        # Only names not looked at before (a set difference, in C): a scan of
        # every module on each growth of sys.modules cost more than the probes.
        for name in sys.modules.keys() - self._looked_at:
            mod = sys.modules.get(name)
            if not (name == "flashinfer" or name.startswith("flashinfer.")):
                self._looked_at.add(name)
                continue
            # A module still executing has not defined its names yet: look again later.
            if getattr(getattr(mod, "__spec__", None), "_initializing", False):
                initializing = True
                continue
            self._looked_at.add(name)
            if mod is not None:
                fresh.append((name, mod))
        if not fresh:
            return initializing
        for name, mod in fresh:
            for attr, fake in self._fakes_by_module.get(name, {}).items():
                original = getattr(mod, attr, None)
                if original is not None and id(original) not in self._replacements:
                    self._register(original, fake)
        self._patch_spec_loaders()  # a lazily imported module may define a JitSpec subclass
        for _name, mod in fresh:
            self._cache_clears.extend(
                v.cache_clear for v in vars(mod).values() if callable(v) and hasattr(v, "cache_clear")
            )
            for attr, value in list(vars(mod).items()):
                replacement = self._replacements.get(id(value))
                if replacement is not None and replacement is not value:
                    self._set_attr(mod, attr, replacement)
        self._find_contexts(fresh)
        return initializing

    def _patch_cute_compile(self) -> None:
        """CuTe DSL kernels are compiled from Python on first use: compiling is the
        launch boundary for them (and would take minutes on a CPU)."""
        cute = sys.modules.get("cutlass.cute")
        if cute is None or self._cute_patched or not hasattr(cute, "compile"):
            return
        self._cute_patched = True

        def compile(kernel: Any, *args: Any, **kwargs: Any) -> Any:
            name = getattr(kernel, "__qualname__", None) or type(kernel).__name__
            raise BoundaryReached(CompiledEntry("cute.compile", name))

        self._set_attr(cute, "compile", compile)

    def _import_hook(
        self, name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0
    ) -> Any:
        module = self._real_import(name, globals, locals, fromlist, level)
        # Inlined from _patch_new_modules' first test: this runs on every import
        # statement a probed call executes, tens of thousands per matrix.
        if self.flashinfer is not None and (len(sys.modules) != self._modules_seen or self._initializing):
            self._patch_new_modules()
        return module

    def _clear_caches(self) -> None:
        # functools caches in flashinfer remember capability answers and modules.
        for clear in self._cache_clears:
            try:
                clear()
            except Exception:  # noqa: BLE001 - a cache that cannot clear holds nothing of ours
                pass


class _Quiet(warnings.catch_warnings):
    def __enter__(self) -> Any:
        result = super().__enter__()
        warnings.simplefilter("ignore")
        return result


def _line_tracer(target: tuple[str, str], lines: set[int]) -> Callable[..., Any]:
    """A sys.settrace function that records the lines run in one function only."""
    filename, function = target

    def local(frame: Any, event: str, arg: Any) -> Any:
        if event == "line":
            lines.add(frame.f_lineno)
        return local

    def global_(frame: Any, event: str, arg: Any) -> Any:
        code = frame.f_code
        if code.co_filename == filename and code.co_name == function:
            return local
        return None

    return global_


# What installs a module a probe needs and does not find (hprobe depends on
# neither: a serving stack brings its own, and the index's torch is CUDA's).
INSTALL_LINES = {
    "torch": "pip install torch --index-url https://download.pytorch.org/whl/cpu (a CPU build is all hprobe needs)",
    "flashinfer": (
        "pip install flashinfer-python (after a CPU torch), or name a release to fetch with --flashinfer VERSION"
    ),
}


def _install_hint(exc: BaseException, module: str) -> str:
    """`; install it: …` where the module itself is missing (not a dependency
    of it, which is the release's or this machine's to mend)."""
    if isinstance(exc, ModuleNotFoundError) and (exc.name or "").split(".")[0] == module:
        return f"; install it: {INSTALL_LINES[module]}"
    return ""
