"""Wheels fetched together: one pip process (support/pip_download.py) in the
background for every release a run is about to need, each published into the
cache the moment it lands, so that the release waiting for it starts probing
while the next downloads.

Only a faster road: a release the batch did not fetch (not on the index, pip
too old or too new for its internals, a timeout) is fetched by plain `pip
download` as before, and that is what says why it cannot be had.
"""

from __future__ import annotations

import json
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

import hprobe
from hprobe.model.errors import InputError
from hprobe.system.bounded import Timeout, run_bounded, stream_bounded

Publish = Callable[[Path, str], object]  # (downloaded wheel, version): moves it into the cache
Refuse = Callable[[str, str], object]  # (version, pip's words): no wheel of it on the index


class Batch:
    """Releases of one distribution being fetched by one pip process."""

    def __init__(self, dist: str, versions: list[str], folder: Path, publish: Publish, refuse: Refuse, timeout: float):
        self.keys = [(dist, version, str(folder)) for version in versions]
        self._done = {version: threading.Event() for version in versions}
        self._publish, self._refuse = publish, refuse
        self._thread = threading.Thread(
            target=self._run, args=(dist, versions, folder, timeout), name="hprobe-fetch", daemon=True
        )

    def begin(self) -> None:
        self._thread.start()

    def wait(self, version: str) -> None:
        """Until the batch has tried `version` (landed in the cache or not)."""
        self._done[version].wait()

    def _run(self, dist: str, versions: list[str], folder: Path, timeout: float) -> None:
        try:
            # A temp dir beside the cached wheels (one filesystem: publishing is a rename).
            with tempfile.TemporaryDirectory(dir=folder, prefix=".download-") as tmp:
                request = json.dumps({"dist": dist, "versions": versions, "dest": tmp})
                stream_bounded(_helper_command(), timeout, request, self._line)
        except (Timeout, OSError, ValueError):
            pass  # whatever did not land is fetched by plain pip download
        finally:
            with _LOCK:
                for key in self.keys:
                    _PENDING.pop(key, None)
            for event in self._done.values():
                event.set()

    def _line(self, line: str) -> None:
        try:
            doc = json.loads(line)
        except json.JSONDecodeError:
            return  # pip's own chatter on stdout
        version = doc.get("version") if isinstance(doc, dict) else None
        if version not in self._done or self._done[version].is_set():
            return
        try:
            if isinstance(doc.get("file"), str):
                self._publish(Path(doc["file"]), version)
            elif isinstance(doc.get("refused"), str):
                self._refuse(version, doc["refused"])
        except (OSError, InputError):
            pass  # the cache could not take it: plain pip download tries again
        finally:
            self._done[version].set()


def _helper_command() -> list[str]:
    # The user's Python with its pip, as `python -m pip` runs (not isolated:
    # pip's configuration comes from the environment too), importing only
    # this one module of hprobe's, by path.
    package_root = str(Path(hprobe.__file__).resolve().parent.parent)
    code = (
        f"import sys; sys.path.insert(0, {package_root!r}); from hprobe.support.pip_download import main; "
        "sys.exit(main())"
    )
    return [sys.executable, "-c", code]


_LOCK = threading.Lock()
_PENDING: dict[tuple[str, str, str], Batch] = {}  # (dist, version, cache folder) -> the batch fetching it


def start(dist: str, versions: list[str], folder: Path, publish: Publish, refuse: Refuse, timeout: float) -> None:
    """Fetch, into `folder`, those of `versions` no batch is fetching yet;
    `refuse` hears of those the index has no wheel of."""
    with _LOCK:
        new = [v for v in dict.fromkeys(versions) if (dist, v, str(folder)) not in _PENDING]
        if len(new) < 2:
            return  # one release: plain pip download costs the same
        batch = Batch(dist, new, folder, publish, refuse, timeout)
        _PENDING.update({key: batch for key in batch.keys})
    batch.begin()


def wait(dist: str, version: str, folder: Path) -> None:
    """Until a batch fetching `version` into `folder` has tried it (at once
    when none is)."""
    with _LOCK:
        batch = _PENDING.get((dist, version, str(folder)))
    if batch is not None:
        batch.wait(version)


def members(
    dist: str,
    specs: list[str],
    names: list[str],
    folder: Path,
    timeout: float,
    max_bytes: int,
    listing_suffix: str | None = None,
    known: dict[str, dict] | None = None,
) -> list[dict] | None:
    """What the helper answered, per specifier in order, for the first wheel
    holding every member `names` (their bytes written under `folder`); None
    when it could not answer, and the caller fetches the plain way. With
    `listing_suffix`, a wheel whose whole directory was read answers with the
    members of that suffix it holds (`listing`, with its `sha256`); `known`
    (wheel file name -> such an answer) lets the helper say a wheel lacks the
    first member without reading it again."""
    request = {"dist": dist, "specs": specs, "members": names, "dest": str(folder), "max_bytes": max_bytes}
    if listing_suffix:
        request.update(listing_suffix=listing_suffix, known=known or {})
    asked = _ask(request, timeout)
    if asked is None:
        return None
    returncode, docs = asked
    answers = [doc for doc in docs if "spec" in doc]
    if returncode != 0 or any("error" in doc for doc in answers):
        return None
    return answers


def links(dist: str, versions: list[str], timeout: float) -> dict[str, dict]:
    """Where pip would fetch each release's wheel (pip_download's `links`),
    by version; a release the helper did not answer for is absent (the
    caller downloads it whole)."""
    asked = _ask({"dist": dist, "links": versions, "dest": ""}, timeout)
    docs = asked[1] if asked is not None else []
    return {doc["version"]: doc for doc in docs if isinstance(doc.get("version"), str)}


def _ask(request: dict, timeout: float) -> tuple[int, list[dict]] | None:
    """The helper's exit code and the JSON objects it printed, one a line (pip's
    own chatter on stdout passed over); None where it could not be run in time."""
    try:
        proc = run_bounded(_helper_command(), timeout, json.dumps(request))
    except (Timeout, OSError):
        return None
    docs = []
    for line in proc.stdout.splitlines():
        try:
            doc = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(doc, dict):
            docs.append(doc)
    return proc.returncode, docs
