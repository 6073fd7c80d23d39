"""Reports as data (with their advice and per-release verdicts), pivots, and the output formats that render them."""
