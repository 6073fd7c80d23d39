"""Padding rules and FlashInfer calls read from a consumer's source tree
(static analysis, never imported), by what each part does, lowest first (a
part imports only the parts above it in this list):

- `tree/`: reading the tree (its modules, the mapping, its model registry,
  engine settings);
- `interpreter/`: evaluating Python without running it, within bounds, and
  a rule's helpers inlined into it;
- `tracing/`: call paths, the keywords a call passes and its head count;
- the modules here, which put the parts together: `extract.py` reads a whole
  tree (rules, calls, pin), `kind.py` says which engine a tree is, `pin.py`
  the flashinfer requirement it declares, `patch.py` writes the suggested
  rules and pin as one patch, `padfn.py` runs `--pad-fn`, the consumer's own
  function, on request."""
