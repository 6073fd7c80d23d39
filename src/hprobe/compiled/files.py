"""What compiled depth rests on besides a release's kernel table: the C++
files its ports follow and the setting that names a table. Importable without
the ports, so that a warm run can key the conclusions it kept on these
without importing the selection code it will not run."""

from __future__ import annotations

from pathlib import Path

# Where the kernel table comes from (support/kernel_tables.py): a table's
# path, or "off", which keeps every answer at the validators.
TABLE_SETTING = "HPROBE_KERNEL_TABLE"

# Under a release's `flashinfer/data`.
KERNELS = "include/flashinfer/trtllm/fmha/fmhaKernels.cuh"
RUNNER = "include/flashinfer/trtllm/fmha/fmhaRunner.cuh"
LAUNCHER = "csrc/trtllm_fmha_kernel_launcher.cu"
PARAMS = "include/flashinfer/trtllm/fmha/fmhaRunnerParams.h"  # 0.7.4 on: RunnerParams' own predicates
# Every file a port reads (trtllm_gen.read_files() derives the same from the
# ports' fingerprints; a test holds them equal).
READ = tuple(sorted((KERNELS, RUNNER, LAUNCHER, PARAMS)))
# Every file the SM12x sparse-MLA entry checks read (sm120_sparse.read_files(), likewise).
ENTRY_READ = ("csrc/sparse_mla_sm120.cu", "csrc/sparse_mla_sm120_prefill.cu")
# Every file the CUDA-core decode plan's checks read (gqa_decode.read_files(), likewise).
DECODE_PLAN_READ = ("csrc/batch_decode.cu", "include/flashinfer/utils.cuh")
# Every file the SM10x cutlass prefill run's checks read (cutlass_prefill.read_files(), likewise).
CUTLASS_PREFILL_READ = ("csrc/fmha_cutlass_sm100.cu",)


def data_dir(package: Path) -> Path:
    """Where a release keeps its C++: `flashinfer/data` (include/, csrc/)."""
    return package / "data"
