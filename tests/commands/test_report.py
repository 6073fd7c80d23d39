"""`hprobe report`: the support matrix across releases as a static page, checked
as HTML and rendered in headless Chromium (the distribution's package, which
scripts/test installs where it can)."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import struct
import subprocess
import zlib
from html import escape as html_escape
from html.parser import HTMLParser
from pathlib import Path

import pytest

from hprobe.model.outcome import KernelSMResult, Outcome
from hprobe.report.formats.html_site import RELEASE_MARK
from hprobe.system.escaping import visible

from ..conftest import POST_48047, ROOT

pytestmark = pytest.mark.slow
ARTIFACTS = ROOT / "test-artifacts"


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    from typer.testing import CliRunner

    from hprobe.cli.app import app

    out = tmp_path_factory.mktemp("site") / "out"
    args = [
        "report",
        "--releases",
        "0.6.13..0.6.14",
        "-k",
        "dsv4-sparse-mla",
        "--sm",
        "100,120",
        "--table",
        str(POST_48047),
        "-o",
        str(out),
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.stderr
    return out


class _Balanced(HTMLParser):
    """Well-formedness of the parts that matter: every element opened is closed."""

    VOID = {"meta", "br", "link", "img", "input", "hr"}

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.doctype = False

    def handle_decl(self, decl: str) -> None:
        self.doctype |= decl.lower() == "doctype html"

    def handle_starttag(self, tag, attrs):
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        pass

    def handle_endtag(self, tag):
        assert self.stack and self.stack[-1] == tag, (tag, self.stack[-3:])
        self.stack.pop()


def test_the_pages_are_written_with_one_heatmap_row_per_release(site):
    html = (site / "index.html").read_text()
    parser = _Balanced()
    parser.feed(html)
    assert parser.doctype and parser.stack == []
    svgs = re.findall(r"<svg class=\"heatmap\".*?</svg>", html, re.S)
    assert len(svgs) == 2  # SM100 and SM120
    for svg in svgs:
        assert re.findall(r'class="release">([^<]+)<', svg) == ["0.6.13", "0.6.14"]
        assert len(re.findall(r"<rect ", svg)) < 2 * 256 // 10  # runs of like answers, not a rect per cell
    sm100 = svgs[0]
    cells = _cells(sm100)
    outcome, title = cells["0.6.13"][8]
    assert (
        outcome == "rejected"
        and title.startswith("flashinfer 0.6.13, h_q ")
        and "Expected 64 or 128 query heads" in title
    )
    assert "Δ<title>0.6.14: +{8, 16, 32}</title>" in sm100  # where the boundary moved
    # ... and the set it moved by, written under the chart, not only in a tooltip.
    assert re.search(
        r'<svg class="heatmap"[^>]*SM100.*?</svg><p class="changes">Δ 0.6.14: \+\{8, 16, 32\}</p>', html, re.S
    )
    # The axis says where its scale changes (1..128 wide, 129..256 narrow).
    assert all('class="scale-break"' in svg and "h_q above 128 at 0.25× the width" in svg for svg in svgs)
    # Outcomes told apart by more than shade: every shape wide enough that is
    # neither accepted nor rejected carries its outcome's mark.
    marks = {o.value: o.mark for o in Outcome} | {"unprobed": "·"}
    for svg in svgs:
        for width, outcome, after in re.findall(
            r'<rect x="[\d.]+" y="\d+" width="([\d.]+)"[^>]*class="o-([a-z-]+)">.*?</rect>'
            r'(<text[^>]*class="mark">[^<]*)?',
            svg,
        ):
            if outcome not in ("accepted", "rejected") and float(width) >= 10:
                assert after.endswith(f">{html_escape(marks[outcome])}"), (outcome, width)
    assert 'id="legend"' in html
    legend = html.split('id="legend"', 1)[1].split("</ul>", 1)[0]
    assert all(f">{mark}</span>" in legend for mark in ("Δ", *(o.mark for o in Outcome)))  # every mark of the charts
    doc = json.loads((site / "matrix.json").read_text())
    assert doc["schema"] == "hprobe.matrix/3" and [r["version"] for r in doc["releases"]] == ["0.6.13", "0.6.14"]
    assert all(len(r["runs"]) < 16 for r in doc["results"])  # runs of h_q, not 256 entries
    assert "dsv4-sparse-mla" in (site / "matrix.md").read_text()


def _cells(svg: str) -> dict[str, dict[int, tuple[str, str]]]:
    """Per release, per h_q: the outcome and tooltip of the shape that covers it
    (a shape spans `data-rows` releases from its top row down)."""
    versions = re.findall(r'<text x="4" y="(\d+)" class="release">([^<]+)<', svg)
    order = [version for _, version in versions]
    by_y = {int(y) - (16 - 4): i for i, (y, _) in enumerate(versions)}  # the row's top, as the rects give it
    cells: dict[str, dict[int, tuple[str, str]]] = {v: {} for v in order}
    for y, span, rows, outcome, title in re.findall(
        r'<rect x="\d+" y="(\d+)"[^>]*data-heads="([\d-]+)" data-rows="(\d+)" '
        r'class="o-([a-z-]+)"><title>([^<]*)</title>',
        svg,
    ):
        low, _, high = span.partition("-")
        first = by_y[int(y)]
        for version in order[first : first + int(rows)]:
            for h in range(int(low), int(high or low) + 1):
                row = cells[version]
                assert h not in row, f"h_q {h} of {version} drawn twice"
                row[h] = (outcome, html.unescape(title))
    return cells


def test_every_cell_keeps_its_outcome_and_evidence(site):
    """The page draws runs, not cells, yet each h_q's outcome and the words of
    its answer are there: the run's tooltip with `#` read as that h_q."""
    page = (site / "index.html").read_text()
    doc = json.loads((site / "matrix.json").read_text())
    svgs = re.findall(r"<svg class=\"heatmap\".*?</svg>", page, re.S)
    for svg, sm in zip(svgs, (100, 120), strict=True):
        cells = _cells(svg)
        for result in (KernelSMResult.from_dict(r) for r in doc["results"] if r["sm"] == sm):
            row = cells[result.flashinfer_version]
            assert sorted(row) == list(range(1, 257)) == sorted(result.heads)
            for h, head in result.heads.items():
                outcome, title = row[h]
                assert outcome == head.outcome.value
                said = title.split(": ", 1)[1]
                words = visible(head.entry or head.message or head.reason or "")
                assert words and words in said.replace("#", str(h)).replace(RELEASE_MARK, result.flashinfer_version), (
                    h,
                    words,
                    said,
                )


def test_a_table_is_judged_release_by_release(site):
    """After #48047 on SM100: broken on 0.6.13 for n = 32/16/8 (TP4/8/16 of
    DeepSeek-V4-Pro), ok on 0.6.14 -- the crash the PR would have shipped."""
    html = (site / "index.html").read_text()
    table = re.search(
        r'<table class="verdicts"><caption>DeepseekV4FlashInferMLAAttention[^<]*SM100.*?</table>', html, re.S
    )
    assert table, "no verdict table for the SM100 backend"
    rows = dict(re.findall(r"<tr[^>]*><th>([0-9.]+)</th>(.*?)</tr>", table.group(0), re.S))
    cells = {v: re.findall(r'<td class="v-([a-z-]+)"', row) for v, row in rows.items()}
    header = re.findall(r"<th>(DeepSeek-V4-Pro TP\d+)<br>", table.group(0))
    pro = {name: i for i, name in enumerate(header)}
    for tp in ("TP4", "TP8", "TP16"):
        assert cells["0.6.13"][pro[f"DeepSeek-V4-Pro {tp}"]] == "broken"
        assert cells["0.6.14"][pro[f"DeepSeek-V4-Pro {tp}"]] == "ok"
    assert cells["0.6.13"][pro["DeepSeek-V4-Pro TP1"]] == "ok"


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


# In CI the browser is a requirement (scripts/test installs it): a needed test never skips there.
@pytest.mark.browser
@pytest.mark.skipif(
    _chromium() is None and not os.environ.get("CI"),
    reason="no chromium here (scripts/test installs it from the distribution's packages when run as root)",
)
def test_the_page_renders_in_headless_chromium(site):
    assert _chromium(), "chromium is missing: scripts/test installs it as root with apt-get"
    shot = site / "shot.png"
    base = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1400,1000"]
    proc = subprocess.run(
        [*base, f"--screenshot={shot}", (site / "index.html").as_uri()], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0 and shot.is_file(), proc.stderr[-500:]
    width, height, pixels = _png_pixels(shot.read_bytes())
    assert (width, height) == (1400, 1000)
    assert len(set(pixels[i : i + 3] for i in range(0, len(pixels), 3 * 97))) > 8, "blank screenshot"
    dom = subprocess.run(
        [*base, "--dump-dom", (site / "index.html").as_uri()], capture_output=True, text=True, timeout=120
    ).stdout
    # What the browser built, not what the legend lists: every shape of the page, and one cell's evidence.
    page = (site / "index.html").read_text()
    assert 'id="legend"' in dom
    assert dom.count("<rect ") == page.count("<rect ") > 0
    assert re.search(r"<title>flashinfer 0\.6\.13, h_q [^<]*Expected 64 or 128 query heads", dom)
    ARTIFACTS.mkdir(exist_ok=True)
    shutil.copy(shot, ARTIFACTS / "report.png")


# Injected into a copy of the page by the test alone (the page itself runs no
# script): what the browser laid out, written where --dump-dom shows it.
_MEASURE = """<script>window.addEventListener("load", () => {
  const d = document.documentElement;
  const accepted = [...document.querySelectorAll("rect.o-accepted")].map(r => r.getBoundingClientRect());
  const out = {scrollWidth: d.scrollWidth, clientWidth: d.clientWidth, accepted: accepted.length,
    narrowest: Math.min(...accepted.map(r => r.width)), right: Math.max(...accepted.map(r => r.right))};
  const pre = document.createElement("pre"); pre.id = "measured";
  pre.textContent = JSON.stringify(out); document.body.appendChild(pre);
});</script>"""


@pytest.mark.browser
@pytest.mark.skipif(
    _chromium() is None and not os.environ.get("CI"),
    reason="no chromium here (scripts/test installs it from the distribution's packages when run as root)",
)
@pytest.mark.parametrize("width", [800, 1280])
def test_the_page_over_every_release_fits_the_window_and_shows_its_accepted_counts(tmp_path, width):
    """No sideways scrolling in an 800 px window (the charts were a fixed 1,080
    px) nor a 1,280 px one, and every accepted count a visible bar."""
    from typer.testing import CliRunner

    from hprobe.cli.app import app

    out = tmp_path / "site"
    result = CliRunner().invoke(
        app, ["report", "--releases", "0.6.12..0.7.4", "-k", "dsv4-sparse-mla", "--sm", "100,120", "-o", str(out)]
    )
    assert result.exit_code == 0, result.stderr
    page = (out / "index.html").read_text()
    assert "<script" not in page
    measured = out / "measured.html"
    measured.write_text(page.replace("</body>", _MEASURE + "</body>"))
    dom = subprocess.run(
        [
            _chromium(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            f"--window-size={width},1000",
            "--virtual-time-budget=3000",
            "--dump-dom",
            measured.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    found = re.search(r'<pre id="measured">([^<]*)</pre>', dom)
    assert found, dom[-500:]
    laid_out = json.loads(html.unescape(found.group(1)))
    assert laid_out["scrollWidth"] <= laid_out["clientWidth"] <= width, laid_out  # no sideways scrolling
    # {8, 16, 32, 64, 128} on both SMs from 0.6.14, {64, 128} on SM100 before: every one a visible bar.
    assert laid_out["accepted"] >= 10 and laid_out["narrowest"] >= 4 and laid_out["right"] <= laid_out["clientWidth"]
    # The rejected strip splits where the answer changes (0.6.14), not where a message moved.
    sm100 = page.split("<h3>SM100</h3>", 1)[1].split("<h3>", 1)[0]
    rejected_rows = sorted({int(r) for r in re.findall(r'data-rows="(\d+)" class="o-rejected"', sm100)})
    assert rejected_rows == [2, 17], rejected_rows  # 0.6.12-0.6.13, then 0.6.14-0.7.4 (17 releases)
    assert "flashinfer/mla/_core.py:878 (_check_dsv4_sparse_mla_inputs): 0.6.14" in html.unescape(page)


def _png_pixels(data: bytes) -> tuple[int, int, bytes]:
    """Width, height and raw RGB(A) rows (filter bytes kept) of a PNG: enough to
    tell a rendered page from a blank one without an imaging library."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, width, height, idat = 8, 0, 0, b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height = struct.unpack(">II", body[:8])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    return width, height, zlib.decompress(idat)


def test_shapes_run_down_the_releases_that_agree_and_keep_each_answer():
    """Synthetic, no probing: three releases lack the entry point (each message
    names its own release), then one accepts some h_q. The absent stretch is one
    shape down three rows, yet each cell's outcome and its release's own words
    come back from the tooltip."""
    from hprobe.model.outcome import HeadResult, Outcome
    from hprobe.model.release import FlashinferInfo, ProbedRelease
    from hprobe.model.sm import SM
    from hprobe.model.targets import Targets
    from hprobe.report.formats.html_site import render_site
    from hprobe.report.model import MatrixReport

    heads = list(range(1, 33))
    releases = []
    for version in ("0.6.7", "0.6.7.post1", "0.6.8", "0.6.9"):
        result = KernelSMResult("k", 100, version)
        for h in heads:
            if version == "0.6.9":
                accepted = h in (8, 16, 32)
                result.heads[h] = HeadResult(
                    h,
                    Outcome.ACCEPTED if accepted else Outcome.REJECTED,
                    entry="m.run" if accepted else None,
                    error_type=None if accepted else "ValueError",
                    message=None if accepted else f"Expected 8, 16 or 32 heads, got {h}",
                )
            else:
                result.heads[h] = HeadResult(h, Outcome.ABSENT, reason=f"flashinfer {version} has no m.run")
        releases.append(ProbedRelease(version, FlashinferInfo(version, "/x"), {("k", 100): result}))
    page = render_site(MatrixReport(releases, Targets([SM.from_number(100)], "flag"), heads, ["k"]))
    [svg] = re.findall(r"<svg class=\"heatmap\".*?</svg>", page, re.S)
    assert re.findall(r'data-rows="(\d+)" class="o-absent"', svg) == ["3"]  # one shape for three releases' 32 h_q
    # The absent shape carries its mark, centred down its three rows; the
    # single accepted and rejected cells are told by colour alone.
    assert re.findall(r'class="o-absent">.*?</rect><text x="([\d.]+)" y="([\d.]+)" class="mark">–</text>', svg) == [
        ("186", "61")
    ]
    assert svg.count('class="mark"') == 1
    assert "scale-break" not in svg  # 1..32: one scale, nothing to say
    cells = _cells(svg)
    for release in releases:
        result = release.results[("k", 100)]
        row = cells[release.info.version]
        assert sorted(row) == heads
        for h, head in result.heads.items():
            outcome, title = row[h]
            assert outcome == head.outcome.value
            said = title.split(": ", 1)[1].replace("#", str(h)).replace(RELEASE_MARK, release.info.version)
            assert (head.entry or head.message or head.reason) in said, (release.info.version, h, said)


def test_outcomes_a_mark_cannot_fit_are_told_apart_by_texture_as_well_as_shade():
    """Synthetic: one h_q refused for the architecture, one for the
    configuration and one inconclusive, each a single 6 px cell with no room
    for its mark; each is filled with its own pattern, and the legend's
    swatch shows that pattern under the same name."""
    from hprobe.model.outcome import HeadResult
    from hprobe.model.release import FlashinferInfo, ProbedRelease
    from hprobe.model.sm import SM
    from hprobe.model.targets import Targets
    from hprobe.report.formats.html_site import render_site
    from hprobe.report.model import MatrixReport

    heads = list(range(1, 9))
    result = KernelSMResult("k", 100, "0.7.4")
    odd = {3: Outcome.UNSUPPORTED_ARCH, 5: Outcome.UNSUPPORTED_CONFIG, 7: Outcome.INCONCLUSIVE}
    for h in heads:
        outcome = odd.get(h, Outcome.ACCEPTED if h % 2 == 0 else Outcome.REJECTED)
        result.heads[h] = HeadResult(h, outcome, entry="m.run" if outcome is Outcome.ACCEPTED else None, reason="r")
    release = ProbedRelease("0.7.4", FlashinferInfo("0.7.4", "/x"), {("k", 100): result})
    page = render_site(MatrixReport([release], Targets([SM.from_number(100)], "flag"), heads, ["k"]))
    [svg] = re.findall(r"<svg class=\"heatmap\".*?</svg>", page, re.S)
    assert 'class="mark"' not in svg  # no cell is wide enough for a mark
    patterns = set(re.findall(r'<pattern id="tex-([a-z-]+)"', page))
    assert patterns == {o.value for o in odd.values()}
    for outcome in odd.values():
        # Drawn in the chart, filled with its pattern over its colour, and shown so in the legend.
        assert f'class="o-{outcome.value}"' in svg
        assert f".heatmap .o-{outcome.value} {{ fill: url(#tex-{outcome.value}) {outcome.colour}; }}" in page
        [swatch] = re.findall(
            rf'<li><span class="swatch" style="background:([^"]+)">[^<]*</span> {outcome.value} \(', page
        )
        assert "gradient" in swatch and outcome.colour in swatch
    # Accepted and rejected stay plain colours, green against grey.
    assert f".heatmap .o-accepted {{ fill: {Outcome.ACCEPTED.colour}; }}" in page
