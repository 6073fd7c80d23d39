"""Evaluating Python without running it: the interpreter over a padding
function's AST, the bounds that keep it finite, and a rule's helpers inlined
into it. Imports tree/ only."""
