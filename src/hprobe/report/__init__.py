"""Reports as data (with their advice and per-release verdicts), pivots, and the
output formats that render them: the modules here first, `formats/` above them
(a report never imports a format; tests/test_layers.py holds the order)."""
