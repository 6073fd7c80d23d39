"""stdout and stderr as a CI runner reads them: no line that hprobe did not
mean as a workflow command can be one.

GitHub's runner executes any output line that starts, after leading white
space, with `::` (`::error::`, `::stop-commands::`, `::add-mask::`), and the
older `##[command]` form anywhere in a line. Every string from outside hprobe
is escaped by its format (`escaping.py`); this wrapper is the one place that
holds the rule for whatever reaches the streams anyway: a click usage message
quoting an argument, a warning, a field a format forgot. Such a line gets a
backslash before its first colon, and `##[` becomes `#\\#[`. hprobe's own
annotations bypass it through `command_line`.
"""

from __future__ import annotations

import io
import os
import sys
from typing import TextIO

from hprobe.system.escaping import LINE_BREAK as _LINE_BREAK
from hprobe.system.escaping import V1_COMMAND as _V1_COMMAND


class CommandGuard(io.TextIOBase):
    def __init__(self, raw: TextIO, name: str = "the output"):
        self.raw = raw
        self.name = name
        self._line = ""  # what was written of the current line while it may still open a command
        self._open = True  # the current line may still turn into `::...`
        self._through_buffer = False  # writes go to the raw stream's byte buffer from now on

    # -- what Rich, click and print() ask of a stream --------------------------------
    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.raw, "encoding", None) or "utf-8"

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return getattr(self.raw, "errors", None)

    def isatty(self) -> bool:
        try:
            return self.raw.isatty()
        except (AttributeError, ValueError):
            return False

    def fileno(self) -> int:
        return self.raw.fileno()

    def writable(self) -> bool:
        return True

    # -- writing -------------------------------------------------------------------
    def write(self, s: str) -> int:
        out: list[str] = []
        for piece in _LINE_BREAK.split(s):
            if not piece:
                continue
            if _LINE_BREAK.fullmatch(piece):
                self._line, self._open = "", True
            elif self._open:
                # Written at once, never held back: a line's opening is judged
                # on what was written of it so far and this piece together.
                combined = self._line + piece
                body = combined.lstrip()
                if body.startswith("::"):
                    at = max(len(combined) - len(body) - len(self._line), 0)
                    piece = piece[:at] + "\\" + piece[at:]
                    self._open = False
                elif body in ("", ":"):
                    self._line = combined
                else:
                    self._open = False
            out.append(piece.replace(_V1_COMMAND, "#\\#["))
        try:
            self._write_all("".join(out))
        except BrokenPipeError:
            raise
        except OSError as exc:
            exc.filename = exc.filename or self.name  # the one line says which stream failed
            raise
        return len(s)

    def _write_all(self, text: str) -> None:
        """Every byte or an error: a text stream drops the rest of a write its
        buffer took only in part (a pipe whose reader left mid-write), and the
        run would end 0 with its output cut short. Bytes go through the
        stream's own buffer, its encoding and error handler, until all are
        written; the next write to a gone reader is the BrokenPipeError."""
        buffer = getattr(self.raw, "buffer", None)
        if buffer is None or not text:
            self.raw.write(text)
            return
        if not self._through_buffer:
            self.raw.flush()  # what was written before the guard goes first
            self._through_buffer = True
        view = memoryview(text.encode(self.encoding, self.errors or "strict"))
        while view:
            try:
                written = buffer.write(view)
            except BlockingIOError as exc:  # a stream another program left non-blocking
                written = exc.characters_written
            if not written:
                _wait_writable(buffer)  # full for now: a gone reader is an error on the next write
                continue
            view = view[written:]
        if getattr(self.raw, "line_buffering", False) and "\n" in text or getattr(self.raw, "write_through", False):
            buffer.flush()

    def flush(self) -> None:
        try:
            self.raw.flush()
        except ValueError:  # closed at interpreter exit
            pass
        except BrokenPipeError:
            raise
        except OSError as exc:
            exc.filename = exc.filename or self.name
            raise

    def command_line(self, line: str) -> None:
        """One workflow command of hprobe's own (an annotation), on a line of its own."""
        self._write_all(("" if self._open and not self._line else "\n") + line + "\n")
        self._line, self._open = "", True


# The standard streams the process was started without (`>&-`): hprobe writes
# what it would have written there to nowhere, and says so once on the other.
CLOSED: set[str] = set()


def install() -> None:
    """Guard sys.stdout and sys.stderr for the rest of the process. Text that
    the stream's encoding cannot carry is written as backslash escapes, never
    an error (a C locale, PYTHONIOENCODING=ascii). A stream the process was
    started without becomes a sink (CLOSED names it); one the caller left
    non-blocking is made blocking, so a large report is written whole rather
    than cut off at the pipe's buffer."""
    for name, fd in (("stdout", 1), ("stderr", 2)):
        stream = getattr(sys, name)
        if stream is None:
            CLOSED.add(name)
            # The sink takes the stream's own descriptor, so no file hprobe
            # opens later can land on fd 1 or 2 and receive what is printed.
            null = os.open(os.devnull, os.O_WRONLY)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
            setattr(sys, name, os.fdopen(fd, "w", encoding="utf-8", closefd=False))
            continue
        try:
            if not os.get_blocking(fd):
                os.set_blocking(fd, True)
        except OSError:
            pass
        if isinstance(stream, CommandGuard):
            continue
        try:
            stream.reconfigure(errors="backslashreplace")
        except (AttributeError, ValueError, io.UnsupportedOperation):
            pass
        setattr(sys, name, CommandGuard(stream, name))


def write_command(stream: TextIO, line: str) -> None:
    """Write hprobe's own workflow command past the guard."""
    if isinstance(stream, CommandGuard):
        stream.command_line(line)
    else:
        stream.write(line + "\n")


def _wait_writable(buffer: object) -> None:
    """Until a non-blocking stream can take more (at most a second a try)."""
    import select
    import time

    try:
        select.select([], [buffer.fileno()], [], 1.0)  # type: ignore[attr-defined]
    except (OSError, ValueError, AttributeError):
        time.sleep(0.05)
