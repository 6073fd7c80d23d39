"""One function per command: a parsed request in, a report out. No printing, no exit codes."""
