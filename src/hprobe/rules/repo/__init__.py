"""Padding rules and FlashInfer calls read from a consumer's source tree
(static analysis, never imported), by what each part does:

- `tree/`: reading the tree (its modules, the mapping, its model registry,
  engine settings, the padding table found in it);
- `interpreter/`: evaluating Python without running it, within bounds;
- `tracing/`: call paths, the keywords a call passes and its head count;
- `pin.py`: the flashinfer requirement the tree declares;
- `patch.py`: writing the suggested rules and pin as one patch;
- `padfn.py`: `--pad-fn`, the consumer's own function, run on request."""
