"""The machine: reading and writing the user's files, bounded subprocesses,
guarded streams, escaping, the environment."""
