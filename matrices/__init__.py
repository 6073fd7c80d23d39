"""Shipped padding tables (*.toml) and mappings (mappings/*.toml): data, installed as
the package `hprobe.matrices` so importlib.resources finds them wherever hprobe is
installed. Nothing here is code."""
