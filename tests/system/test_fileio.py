"""system/fileio: every file hprobe reads is a regular file within a size,
or one InputError naming it; every output is written atomically to a regular
file (or in place to a terminal or pipe), never through a link, never over
an input of the same run."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from hprobe.model.errors import InputError
from hprobe.system.fileio import read_bytes, read_text, read_text_or_none, refuse_clobbering, write_output

pytestmark = pytest.mark.pure


def test_a_read_refuses_what_is_not_a_regular_file_within_its_size(tmp_path: Path) -> None:
    good = tmp_path / "t.toml"
    good.write_bytes(b"x" * 100)
    assert read_bytes(good, "table file") == b"x" * 100
    with pytest.raises(InputError, match=r"t.toml: the table file is larger than 0 MiB; not read"):
        read_bytes(good, "table file", limit=10)
    with pytest.raises(InputError, match="no such table file"):
        read_bytes(tmp_path / "missing.toml", "table file")
    with pytest.raises(InputError, match="is a directory, not a table file"):
        read_bytes(tmp_path, "table file")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="not a regular file"):
        read_bytes(fifo, "table file")  # refused before it is opened: a FIFO would block
    assert read_text_or_none(fifo) is None
    latin = tmp_path / "latin.toml"
    latin.write_bytes("é".encode("latin-1"))
    with pytest.raises(InputError, match=r"the table file is not UTF-8 text \(byte 0\)"):
        read_text(latin, "table file")


def test_an_output_replaces_atomically_keeps_its_mode_and_never_follows_a_link(tmp_path: Path) -> None:
    out = tmp_path / "out.toml"
    out.write_text("old")
    out.chmod(0o640)
    write_output(out, "new", "-o")
    assert out.read_text() == "new" and stat.S_IMODE(out.stat().st_mode) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["out.toml"]  # no temp file left
    with pytest.raises(InputError, match="exists; pass --force to overwrite"):
        write_output(out, "again", "-o", overwrite=False)
    target = tmp_path / "target"
    target.write_text("theirs")
    link = tmp_path / "link.toml"
    link.symlink_to(target)
    with pytest.raises(InputError, match="is a symlink"):
        write_output(link, "x", "-o")
    assert target.read_text() == "theirs"
    with pytest.raises(InputError, match="the directory .* does not exist"):
        write_output(tmp_path / "no" / "such" / "x.toml", "x", "-o")
    write_output(tmp_path / "patch.diff", b"\r\nexact bytes", "--diff")
    assert (tmp_path / "patch.diff").read_bytes() == b"\r\nexact bytes"


def test_an_output_that_is_an_input_or_another_output_is_refused(tmp_path: Path) -> None:
    table = tmp_path / "t.toml"
    table.write_text("x")
    hard = tmp_path / "hard.toml"
    os.link(table, hard)
    with pytest.raises(InputError, match="is the --table input"):
        refuse_clobbering({"-o": hard}, {"--table": [table]})  # the same file under another name
    with pytest.raises(InputError, match="is also -o's output"):
        refuse_clobbering({"-o": tmp_path / "a.toml", "--diff": tmp_path / "sub" / ".." / "a.toml"}, {})
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "rules.py").write_text("x = 1\n")
    with pytest.raises(InputError, match="is a file of --repo"):
        refuse_clobbering({"-o": repo / "pkg" / "rules.py"}, {}, repo)
    refuse_clobbering({"--diff": repo / "fix.diff", "-o": None}, {"--table": [table]}, repo)  # new files: fine
