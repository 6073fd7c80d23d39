"""The command line: typer commands that parse, call one command, render and exit."""
