"""Padding rules read from a consumer's source tree (static analysis, never imported)."""
