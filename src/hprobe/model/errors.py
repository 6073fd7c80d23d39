"""Errors that end a command with one line and a documented exit code."""

from __future__ import annotations

# Exit codes, documented in README.md. The CLI is the only place that maps
# exceptions to them.
EXIT_OK = 0
EXIT_FINDINGS = 1  # something broken (or reducible under --strict)
EXIT_INPUT = 2  # usage or input error: bad table, unknown kernel, bad SM, ...
EXIT_INCONCLUSIVE = 3  # some results inconclusive, nothing broken
EXIT_ENVIRONMENT = 4  # torch or flashinfer missing or unusable: nothing could be probed


class HprobeError(Exception):
    """An error the user can act on; printed as one line, never a traceback."""

    exit_code = EXIT_INPUT

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class InputError(HprobeError):
    """Bad input: a malformed table, an unknown kernel id, an impossible SM, ..."""

    exit_code = EXIT_INPUT


class EnvironmentProblem(HprobeError):
    """torch or flashinfer cannot be loaded here, so nothing can be probed."""

    exit_code = EXIT_ENVIRONMENT


class IndexUnlisted(InputError):
    """The package index could not list a distribution's releases (the
    network, pip's index-url, a timeout): a fact of this machine, not of the
    input. A command that can go on without the list (a pin's ends, the pin
    search) says so and is inconclusive; one that cannot is an input error."""


class PinUnserved(IndexUnlisted):
    """The release a pin names cannot be fetched (the index does not serve
    it, or the network failed): the tree's pin is what it is, so the run is
    inconclusive where it needs that release, never an input error."""


class NothingToCheck(HprobeError):
    """The input holds nothing to judge (a tree with no padding rule): said in
    one line, exit 3 like any run that could not decide, and no empty table
    is written."""

    exit_code = EXIT_INCONCLUSIVE
