"""Past the validators: what compiled code would do with a call, read from the
release's own C++ and kernel tables. Lowest first (a part imports only the
parts above it in this list): `files`, `cxx` and `table` (what is read and
how); the ports over them, one package or module per entry (`trtllm_gen/`,
`sm120_sparse/`, `gqa_decode`); `depth`, which asks the ports for a probe's
answers. tests/test_layers.py holds the order."""
