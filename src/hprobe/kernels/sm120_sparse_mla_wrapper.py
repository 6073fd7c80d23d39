"""The public SM12x sparse-MLA wrapper, `SparseMLASm120Wrapper` (0.7.0+).

It is probed on its own, beside the private runner the `sm120-sparse-mla`
probe calls, so that a release in which the public name stops being a plain
alias of that runner is still answered for what users call."""

from __future__ import annotations

from hprobe.kernels.sm120_sparse_mla import SM120SparseMLAProbe


class SM120SparseMLAWrapperProbe(SM120SparseMLAProbe):
    id = "sm120-sparse-mla-wrapper"
    entry_point = "flashinfer.mla.SparseMLASm120Wrapper"
    summary = "SM12x sparse-MLA through the public SparseMLASm120Wrapper (0.7.0+)"
