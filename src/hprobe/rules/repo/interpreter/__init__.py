"""Evaluating Python without running it: the interpreter over a padding
function's AST, and the bounds that keep it finite."""
