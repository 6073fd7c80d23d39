"""A pytest plugin for tests/test_tiers.py: in the process it is loaded into,
importing torch or flashinfer fails, and so does starting a subprocess or
forking. The pure tier must pass under it."""

import builtins
import os
import subprocess

_import = builtins.__import__


def _guarded_import(name, *args, **kwargs):
    if name.split(".")[0] in ("torch", "flashinfer"):
        raise ImportError(f"tier guard: {name} is not for the pure tier")
    return _import(name, *args, **kwargs)


def _no_subprocess(self, *args, **kwargs):
    raise RuntimeError("tier guard: no subprocess in the pure tier")


def _no_fork():
    raise RuntimeError("tier guard: no fork in the pure tier")


builtins.__import__ = _guarded_import
subprocess.Popen.__init__ = _no_subprocess  # type: ignore[method-assign]
os.fork = _no_fork
