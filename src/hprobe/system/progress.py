"""What a slow step tells the user while it runs.

Commands report progress through a `Callable[[str], None]` the CLI hands
them: a plain message is transient (a status line on a terminal, nothing
elsewhere). A `Statement` is one the user should still be able to read after
the run, on a terminal or in a CI log: what a long search is about to ask of
the index and the disk, said before it starts."""

from __future__ import annotations


class Statement(str):
    """A progress message kept as a line on stderr, not only shown in passing."""

    __slots__ = ()
