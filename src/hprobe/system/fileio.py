"""Reading the user's files and writing the outputs they name, safely.

Input files are read only when they are regular files, and only up to a size
cap: a FIFO would block, a device would never end. Output files are written
through a temporary file renamed over a regular file, in place into a
character device (`/dev/null`, `/dev/stdout`), and never over a symlink, a
FIFO or a directory: those are refused before any work is done.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from hprobe.model.errors import InputError
from hprobe.system.escaping import opens_command
from hprobe.system.lifetime import remove_orphans, scratch_dir

MAX_INPUT_BYTES = 16 << 20  # tables, mappings, baselines, repo metadata
# One Python file of a --repo tree: vLLM's and SGLang's largest are about 0.3 MiB;
# parsing costs some 500 bytes of memory a node, so a 6 MiB list literal peaked at 2.9 GB.
MAX_SOURCE_BYTES = 1 << 20


def regular_file(path: Path) -> bool:
    """True for a regular file (symlinks followed); FIFOs, devices and
    directories are not, and are never opened."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


# Set while a reading is recorded (`reads_recorded`): each file read, with a
# digest of what was read (None: not read), so that a reading kept in the
# cache can tell when a file it rests on has changed.
_recording: contextvars.ContextVar[dict[str, str | None] | None] = contextvars.ContextVar("hprobe_reads", default=None)


@contextlib.contextmanager
def reads_recorded() -> Iterator[dict[str, str | None]]:
    """Every file `read_bytes` is asked for inside the block: path -> content
    digest, or None where it could not be read."""
    reads: dict[str, str | None] = {}
    token = _recording.set(reads)
    try:
        yield reads
    finally:
        _recording.reset(token)


def present(path: Path) -> bool:
    """Whether something exists at `path` (`Path.exists`), recorded like a
    read: a file that appears later changes what a reading found."""
    found = path.exists()
    if (reads := _recording.get()) is not None and str(path) not in reads:
        reads[f"exists:{path}"] = "yes" if found else None
    return found


def content_digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def read_bytes(path: Path, what: str, limit: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of a regular file of at most `limit` bytes, or one InputError."""
    reads = _recording.get()
    if reads is None:
        return _read_bytes(path, what, limit)
    try:
        data = _read_bytes(path, what, limit)
    except InputError:
        reads[str(path)] = None
        raise
    reads[str(path)] = content_digest(data)
    return data


def _read_bytes(path: Path, what: str, limit: int) -> bytes:
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise InputError(f"{path}: no such {what}") from None
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: cannot read the {what}: {_reason(exc)}") from None
    if stat.S_ISDIR(mode):
        raise InputError(f"{path}: is a directory, not a {what}")
    if not stat.S_ISREG(mode):
        raise InputError(f"{path}: not a regular file (a FIFO, socket or device), so not read as a {what}")
    try:
        # O_NONBLOCK: should the path be swapped for a FIFO after the check,
        # opening it still returns at once.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        raise InputError(f"{path}: cannot read the {what}: {_reason(exc)}") from None
    if len(data) > limit:
        raise InputError(f"{path}: the {what} is larger than {limit >> 20} MiB; not read")
    return data


def read_text(path: Path, what: str, limit: int = MAX_INPUT_BYTES) -> str:
    """The UTF-8 text of a regular file of at most `limit` bytes, or one InputError."""
    data = read_bytes(path, what, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: the {what} is not UTF-8 text (byte {exc.start})") from None


def read_text_or_none(path: Path, limit: int = MAX_SOURCE_BYTES) -> str | None:
    """Text of a file found while walking a tree, or None when it is not a
    regular file, too large or unreadable (the caller reports it as skipped)."""
    if not regular_file(path):
        if (reads := _recording.get()) is not None:
            reads[str(path)] = None
        return None
    try:
        data = read_bytes(path, "file", limit)
    except InputError:
        return None
    return data.decode("utf-8", errors="replace")


def check_output(path: Path, option: str, overwrite: bool = True) -> None:
    """Refuse an output path before any work, so a bad one costs nothing."""
    if _own_stream(path) is not None:
        return  # stdout or stderr, by any name: written in place, after what is printed there
    info = _lstat(path, option)
    if info is not None:
        if stat.S_ISLNK(info.st_mode) and _character_device(path):
            # /dev/stdout, /dev/stderr, /dev/fd/N: links to a terminal or pipe, written in place.
            info = os.stat(path)
        if stat.S_ISLNK(info.st_mode):
            raise InputError(
                f"{option} {path}: is a symlink; hprobe writes only regular files (give the target's path)"
            )
        if stat.S_ISCHR(info.st_mode):
            if not os.access(path, os.W_OK):
                raise InputError(f"{option} {path}: not writable")
            return
        if not stat.S_ISREG(info.st_mode):
            raise InputError(f"{option} {path}: not a regular file (a directory, FIFO, socket or block device)")
        if not overwrite:
            raise InputError(f"{option} {path}: exists; pass --force to overwrite")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise InputError(f"{option} {path}: the directory {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK) or (info is not None and not os.access(path, os.W_OK)):
        raise InputError(f"{option} {path}: not writable")


def write_output(path: Path, data: str | bytes, option: str, overwrite: bool = True) -> None:
    """Write `data` to the path the user named: atomically for a regular file,
    in place for a character device; anything else is refused."""
    check_output(path, option, overwrite)
    own = _own_stream(path)
    if own is not None:
        try:
            _write_to_stream(own, data)
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise InputError(f"{option} {path}: cannot write: {_reason(exc)}") from None
        return
    payload = data.encode("utf-8") if isinstance(data, str) else data  # bytes: written exactly (a patch)
    try:
        if stat.S_ISCHR(os.stat(path).st_mode):
            with open(path, "wb") as fh:
                fh.write(payload)
            return
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise InputError(f"{option} {path}: cannot write: {_reason(exc)}") from None
    fd, tmp = tempfile.mkstemp(dir=path.parent if str(path.parent) else ".", prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
        try:
            os.chmod(tmp, stat.S_IMODE(os.stat(path).st_mode))  # keep an existing file's mode
        except FileNotFoundError:
            os.chmod(tmp, 0o666 & ~current_umask())
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise InputError(f"{option} {path}: cannot write: {_reason(exc)}") from None


def _lstat(path: Path, option: str) -> os.stat_result | None:
    """The path's own status (a symlink as itself), None when nothing is there."""
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise InputError(f"{option} {path}: {_reason(exc)}") from None


def _character_device(path: Path) -> bool:
    try:
        return stat.S_ISCHR(os.stat(path).st_mode)
    except OSError:
        return False


def is_stdout(path: Path) -> bool:
    """Whether `path` is this process's stdout, by whatever name."""
    return _own_stream(path) == 1


def _own_stream(path: Path) -> int | None:
    """1 or 2 when `path` is this process's stdout or stderr (/dev/stdout,
    /dev/fd/2, the terminal itself), whatever it is: a terminal, a pipe, a
    file the shell redirected to."""
    try:
        target = os.stat(path)
    except (OSError, ValueError):
        return None
    for fd in (1, 2):
        try:
            if os.path.samestat(target, os.fstat(fd)):
                return fd
        except OSError:
            continue
    return None


def _write_to_stream(fd: int, data: str | bytes) -> None:
    """Written after what hprobe already printed there, never truncating it;
    text through the stream itself, so its guard against workflow commands
    holds for it too (a patch is bytes, written exactly)."""
    stream = sys.stdout if fd == 1 else sys.stderr
    if isinstance(data, str):
        stream.write(data)
        stream.flush()
        return
    if opens_command(data.decode("utf-8", errors="replace")):
        # Bytes are written exactly or not at all: a patch whose own lines would
        # act on a CI log goes to a file instead.
        raise InputError(
            f"{'stdout' if fd == 1 else 'stderr'}: the patch holds a line a CI runner would read as a workflow command "
            "(`::` or `##[`); write it to a file"
        )
    stream.flush()
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def current_umask() -> int:
    """The process umask (read by setting it, so set it straight back)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _reason(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__


SITE_TEMP = ".hprobe-site"  # a file of a site being written: `.hprobe-site-<pid>-<name>.<random>.tmp`
SITE_LOCK_WAIT_S = 60.0


@contextlib.contextmanager
def _locked_directory(path: Path) -> Iterator[None]:
    """An exclusive lock on the directory itself (flock on its descriptor):
    nothing is left in it. Waited for a bounded time: a run writes its files
    in well under a second."""
    import fcntl
    import time

    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        deadline = time.monotonic() + SITE_LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise InputError(
                        f"{path}: another process has held it locked for {SITE_LOCK_WAIT_S:g} s; the site there is "
                        "unchanged"
                    ) from None
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)  # the lock goes with the descriptor


class SiteWriter:
    """A directory of files written all or nothing (`hprobe report -o`).

    Everything that can be refused is refused when this is made, before any
    probing: a symlink, a file where the directory should be, files that exist
    without --force, a parent that does not exist or cannot be written (a
    scratch directory is made beside the target to prove it). `commit` writes
    every file to a temporary name first and puts them in place only once all
    are written: a new site by renaming its scratch directory into place, an
    existing one file by file, each by an atomic rename. A failure leaves the
    previous site as it was, and no scratch files behind."""

    def __init__(self, target: Path, names: tuple[str, ...], option: str, overwrite: bool):
        self.target, self.names, self.option = target, names, option
        self.scratch: Path | None = None
        info = _lstat(target, option)
        if info is not None and stat.S_ISLNK(info.st_mode):
            raise InputError(f"{option} {target}: is a symlink; give the directory's own path")
        if info is not None and not stat.S_ISDIR(info.st_mode):
            raise InputError(f"{option} {target}: not a directory")
        if info is None:
            parent = target.parent if str(target.parent) else Path(".")
            if not parent.is_dir():
                raise InputError(f"{option} {target}: the directory {parent} does not exist")
            try:
                # Named by its owner: a scratch directory a killed run left here goes now.
                self.scratch = scratch_dir(parent, f".{target.name}.hprobe")
            except OSError as exc:
                raise InputError(f"{option} {target}: cannot create it: {_reason(exc)}") from None
        else:
            for name in names:
                check_output(target / name, option, overwrite)
            try:  # proven writable now, not after the probing
                fd, probe = tempfile.mkstemp(dir=target, prefix=".hprobe-", suffix=".tmp")
                os.close(fd)
                os.unlink(probe)
            except OSError as exc:
                raise InputError(f"{option} {target}: cannot write in it: {_reason(exc)}") from None

    def commit(self, files: dict[str, str]) -> None:
        assert set(files) == set(self.names)
        if self.scratch is not None:
            try:
                for name, text in files.items():
                    path = self.scratch / name
                    path.write_bytes(text.encode("utf-8"))
                    os.chmod(path, 0o666 & ~current_umask())
                os.chmod(self.scratch, 0o777 & ~current_umask())
                os.rename(self.scratch, self.target)  # fails, rather than merge, if it appeared meanwhile
            except OSError as exc:
                raise InputError(f"{self.option} {self.target}: cannot write: {_reason(exc)}") from None
            self.scratch = None
            return
        # Two runs replacing one site at once would each put some of their files
        # in place: the directory is locked while a run puts in its set, so the
        # site is always one run's. Temp files carry their writer's pid: a killed
        # writer's are removed by the next.
        with _locked_directory(self.target):
            remove_orphans(self.target, SITE_TEMP)
            written: list[tuple[str, Path]] = []
            try:
                for name, text in files.items():
                    fd, tmp = tempfile.mkstemp(
                        dir=self.target, prefix=f"{SITE_TEMP}-{os.getpid()}-{name}.", suffix=".tmp"
                    )
                    written.append((tmp, self.target / name))
                    with os.fdopen(fd, "wb") as fh:
                        fh.write(text.encode("utf-8"))
                    os.chmod(tmp, 0o666 & ~current_umask())
            except OSError as exc:
                for tmp, _ in written:
                    Path(tmp).unlink(missing_ok=True)
                raise InputError(
                    f"{self.option} {self.target}: cannot write: {_reason(exc)}; the site there is unchanged"
                ) from None
            for tmp, path in written:
                os.replace(tmp, path)

    def discard(self) -> None:
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch = None


# Files of a --repo tree hprobe reads for rules and pins: never an output.
_READ_FROM_A_TREE = ("pyproject.toml", "setup.py", "setup.cfg", "pylock.toml", "poetry.lock", "METADATA")


def refuse_clobbering(outputs: dict[str, Path | None], inputs: dict[str, list[Path]], repo: Path | None = None) -> None:
    """Before any work: an output that is one of the run's inputs (a table, a
    mapping, a baseline, a file of the repo's that hprobe reads) or another
    output of the same run is an input error, never a file silently replaced.
    Paths are compared as the file system resolves them (symlinks, `..`, hard
    links). stdout and stderr, by any name, are written in place and exempt."""
    seen: dict[str, str] = {}
    for option, path in outputs.items():
        if path is None or _own_stream(path) is not None:
            continue
        key = _identity(path)
        for other_option, other in inputs.items():
            for item in other:
                if _identity(item) == key:
                    raise InputError(
                        f"{option} {path}: is the {other_option} input {item}; give another path for the output"
                    )
        if key in seen:
            raise InputError(f"{option} {path}: is also {seen[key]}'s output; give each output its own path")
        seen[key] = option
        if repo is not None and _inside_repo(path, repo):
            raise InputError(
                f"{option} {path}: is a file of --repo {repo} that hprobe reads; write the output elsewhere"
            )


def _identity(path: Path) -> str:
    """One name per file: the inode of an existing one, else its resolved path."""
    try:
        info = os.stat(path)
        return f"inode:{info.st_dev}:{info.st_ino}"
    except OSError:
        return f"path:{os.path.realpath(path)}"


def _inside_repo(path: Path, repo: Path) -> bool:
    """An existing Python, pin or metadata file under the repo tree (what
    --repo reads); a new file there (patch.diff) is not."""
    resolved = Path(os.path.realpath(path))
    root = Path(os.path.realpath(repo))
    if not resolved.exists() or (root != resolved and root not in resolved.parents):
        return False
    name = resolved.name
    return (
        name.endswith(".py") or name in _READ_FROM_A_TREE or (name.startswith("requirements") and name.endswith(".txt"))
    )
