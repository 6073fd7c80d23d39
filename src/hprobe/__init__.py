"""hprobe: which query-head counts FlashInfer's kernels accept, from their own validators."""

__version__ = "0.3.0"
