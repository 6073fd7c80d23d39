"""`hprobe report`: the support matrix across releases as a static page.

One section per kernel variant; per SM an SVG heatmap, h_q across and releases
down, each cell coloured *and* marked by its outcome, with the evidence in its
tooltip (`<title>`). Below each heatmap the same evidence as a table, so the
page reads with JavaScript off (it uses none) and without colour. Rows where
the accepted set changed from the release above are marked with the change.
Self-contained: no network, no external CSS or JS."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from hprobe import __version__
from hprobe.model.heads import compact_set
from hprobe.model.outcome import HeadResult, KernelSMResult, Outcome, without_count
from hprobe.model.verdict import Verdict
from hprobe.report.formats.base import NotRendered, RenderOptions
from hprobe.system.escaping import html as escape

if TYPE_CHECKING:
    from hprobe.report.model import CheckReport, MatrixReport

# The h_q axis gives the counts that matter the room: 6 px each up to 128
# (every count a TP split of 128 or fewer heads gives), 1.5 px each above.
# Release names on the left, a narrow change mark on the right: the widest
# heatmap (1..256) is 1,080 px, and the page fits 1,280 px without scrolling.
WIDE_UP_TO, WIDE_W, NARROW_W = 128, 6.0, 1.5
CELL_H, LEFT, TOP, CHANGE_W = 16, 90, 34, 30
MARK_MIN_W = 10  # the narrowest shape that carries its outcome's mark
AXIS_TICKS = (1, 8, 16, 32, 64, 96, 128, 192, 256)


def _positions(heads: list[int]) -> list[float]:
    """The x of each probed h_q's cell, then the right edge after the last."""
    xs, x = [], float(LEFT)
    for h in heads:
        xs.append(x)
        x += WIDE_W if h <= WIDE_UP_TO else NARROW_W
    return [*xs, x]


def render(report: object, options: RenderOptions) -> str:
    """The page of `hprobe report` (a SiteReport), or of a bare matrix."""
    from hprobe.report.catalogue import SiteReport
    from hprobe.report.model import MatrixReport

    if isinstance(report, SiteReport):
        return render_site(report.matrix, report.tables)
    if isinstance(report, MatrixReport):
        return render_site(report)
    raise NotRendered(f"the page renders report and matrix results, not {type(report).__name__}")


def render_site(report: MatrixReport, tables: CheckReport | None = None) -> str:
    releases = [rel.info.version for rel in report.releases]
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>hprobe support matrix — flashinfer {escape(releases[0])}…{escape(releases[-1])}</title>",
        f"<style>{_CSS}{_outcome_css()}{_verdict_css()}</style></head><body>",
        _patterns(),
        "<h1>Query-head counts FlashInfer's kernels accept</h1>",
        f"<p>flashinfer {escape(', '.join(releases))}; h_q {escape(compact_set(report.heads))}; "
        f"answers from each release's own validators, probed by hprobe {escape(__version__)} "
        "(the GPU faked, every Python check run, the call stopped where compiled code begins).</p>",
        _legend(tables is not None),
    ]
    if tables is not None:
        parts.append(_table_sections(tables))
    for key in report.keys or sorted({r.key for r in report.results}):
        parts.append(f'<section id="{escape(key)}"><h2>{escape(key)}</h2>')
        for sm in [s.number for s in report.targets.sms]:
            rows = [(rel.info.version, rel.results.get((key, sm))) for rel in report.releases]
            parts.append(f"<h3>SM{sm}</h3>")
            parts.append(_heatmap(key, sm, rows, report.heads))
            parts.append(_evidence(rows))
        parts.append("</section>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _table_sections(check: CheckReport) -> str:
    """Per table x backend x SM: the verdict of each model x TP on each release,
    the releases the table's pin admits shaded."""
    out = ["<h2>Padding tables</h2>"]
    for table in check.tables:
        pin = SpecifierSet(table.requires_flashinfer) if table.requires_flashinfer else None
        scope = f"pin {table.requires_flashinfer}: the releases it admits are shaded" if pin else "no pin"
        out.append(f"<h3>{escape(table.name)}</h3><p>{escape(scope)}</p>")
        for grid in (g for g in check.verdict_grids if g.table is table):
            head = "".join(
                f"<th>{escape(model)} TP{tp}<br>{n} → {'raises' if p is None else p}</th>"
                for model, tp, n, p in grid.cases
            )
            rows = []
            for version, row in grid.rows:
                cells = []
                for cell in row:
                    if cell is None:
                        cells.append("<td>–</td>")
                        continue
                    evidence = cell.evidence
                    tip = (
                        f"{cell.verdict.value}"
                        + (f"; {cell.best} accepted" if cell.best else "")
                        + (
                            f"; {evidence.error_type}: {evidence.message}"
                            if evidence is not None and evidence.error_type
                            else ""
                        )
                    )
                    cells.append(
                        f'<td class="v-{escape(cell.verdict.value)}" '
                        f'title="{escape(tip)}">{escape(cell.verdict.value)}</td>'
                    )
                shade = ' class="in-pin"' if pin is not None and _admits(pin, version) else ""
                rows.append(f"<tr{shade}><th>{escape(version)}</th>{''.join(cells)}</tr>")
            backend = grid.backend
            out.append(
                f'<table class="verdicts"><caption>{escape(backend.name)} → {escape(backend.variant_key)} · '
                f"SM{grid.sm} · {escape(backend.rule.describe())}</caption>"
                f"<thead><tr><th>release</th>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
            )
    return "\n".join(out)


def _admits(pin: SpecifierSet, version: str) -> bool:
    try:
        return pin.contains(Version(version), prereleases=True)
    except InvalidVersion:
        return False


def _verdict_css() -> str:
    return " ".join(f".v-{v.value} {{ background: {v.page_colour}; }}" for v in Verdict)


def _patterns() -> str:
    """The textures, defined once per page for every heatmap to fill with."""
    drawn = {
        "stripes": '<line x1="0" y1="0" x2="0" y2="4" stroke="#fff" stroke-width="1.5"/>',
        "cross": '<line x1="0" y1="0" x2="0" y2="4" stroke="#fff"/><line x1="0" y1="0" x2="4" y2="0" stroke="#fff"/>',
        "dots": '<circle cx="2" cy="2" r="0.9" fill="#fff"/>',
    }
    out = []
    for outcome in Outcome:
        texture = outcome.texture
        if texture is not None:
            turn = ' patternTransform="rotate(45)"' if texture != "dots" else ""
            out.append(
                f'<pattern id="tex-{outcome.value}" width="4" height="4" patternUnits="userSpaceOnUse"{turn}>'
                f'<rect width="4" height="4" fill="{outcome.colour}"/>{drawn[texture]}</pattern>'
            )
    return f'<svg width="0" height="0" aria-hidden="true" class="textures"><defs>{"".join(out)}</defs></svg>'


def _swatch_background(outcome: Outcome) -> str:
    """The legend's swatch, textured as the heatmaps draw the outcome."""
    colour = outcome.colour
    match outcome.texture:
        case "stripes":
            return f"repeating-linear-gradient(45deg, {colour} 0 2px, #fff 2px 3px)"
        case "cross":
            return (
                "repeating-linear-gradient(45deg, #fff 0 1px, transparent 1px 3px), "
                f"repeating-linear-gradient(-45deg, #fff 0 1px, {colour} 1px 3px)"
            )
        case "dots":
            return f"radial-gradient(#fff 25%, {colour} 30%) 0 0 / 4px 4px"
        case _:
            return colour


def _texture_said(outcome: Outcome) -> str:
    texture = outcome.texture
    return f" ({texture})" if texture else ""


def _outcome_css() -> str:
    unprobed = f".heatmap .o-unprobed {{ fill: {Outcome.INCONCLUSIVE.colour}; }}"  # an h_q not asked on that release
    fills = [
        f".heatmap .o-{outcome.value} {{ fill: "
        + (f"url(#tex-{outcome.value}) {outcome.colour}" if outcome.texture else outcome.colour)
        + "; }"
        for outcome in Outcome
    ]
    return " ".join([*fills, unprobed])


def _legend(verdicts: bool) -> str:
    """Every colour the page uses: outcomes in the heatmaps, verdicts in the tables."""
    items = "".join(
        f'<li><span class="swatch" style="background:{_swatch_background(outcome)}">{escape(outcome.mark)}</span> '
        f"{escape(outcome.value)}{_texture_said(outcome)}</li>"
        for outcome in Outcome
    )
    items += f'<li><span class="swatch" style="background:{Outcome.INCONCLUSIVE.colour}"> </span> not probed</li>'
    # Every mark in the charts is in the legend: Δ too, and where its set is read.
    items += (
        '<li><span class="swatch change-mark">Δ</span> the accepted set changed from the release above (the change '
        "is written under the chart)</li>"
    )
    if verdicts:
        items += "".join(
            f'<li><span class="swatch" style="background:{v.page_colour}">{escape(v.mark)}</span> {escape(v.value)}: '
            f"{escape(v.explanation)}</li>"
            for v in Verdict
        )
    return f'<ul class="legend" id="legend" aria-label="legend">{items}</ul>'


@dataclass
class _Shape:
    """A run of h_q answered alike, down the consecutive release rows that agree."""

    first: int  # row
    last: int  # row
    start: int  # index of its first h_q
    heads: list[int]
    outcome: Outcome | None
    said: str  # in the first release's own words
    # `said` with the release it names written RELEASE_MARK and no file:line,
    # as every release of the shape says it
    template: str
    # the message's file:line -> the releases that raise it there
    places: dict[str, list[str]] = field(default_factory=dict)


# Where an answer names its release ("flashinfer 0.6.3 has no ..."), a shape
# down several releases writes this instead; the shape's tooltip names them.
RELEASE_MARK = "‹release›"


def _without_release(said: str, version: str) -> str:
    """`said` with the release number it names as RELEASE_MARK (0.6.7, but
    not the 0.6.7 of 0.6.7.post1)."""
    if version not in said:
        return said
    return re.sub(rf"(?<![\w.]){re.escape(version)}(?![\w]|\.\w)", RELEASE_MARK, said)


def _heatmap(key: str, sm: int, rows: list[tuple[str, KernelSMResult | None]], heads: list[int]) -> str:
    """One rect per run of neighbouring h_q that share an outcome and a reason,
    drawn down through the consecutive releases that answer that run alike: a
    row of 256 cells is a handful of shapes, and nineteen releases that agree
    are one. A message that only moved (another file:line) is the same answer:
    the shape's tooltip names each place with its releases. The tooltip says
    what each of its h_q got on each of its releases, the h_q a message names
    written `#` (`got #`), so every cell's answer is still there."""
    xs = _positions(heads)
    width = round(xs[-1]) + CHANGE_W
    height = TOP + CELL_H * len(rows) + 6
    changes: list[str] = []  # each Δ with its set, written under the chart as well as in its tooltip
    out = [
        f'<svg class="heatmap" role="img" aria-label="{escape(key)} SM{sm}: h_q across, releases down" '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">'
    ]
    for i, h in enumerate(heads):
        if h in AXIS_TICKS:
            out.append(f'<text x="{xs[i]:g}" y="{TOP - 6}" class="axis">{h}</text>')
    # The scale changes where the counts past WIDE_UP_TO begin: drawn and said.
    past = next((i for i, h in enumerate(heads) if h > WIDE_UP_TO), None)
    if past:
        x = xs[past]
        out.append(
            f'<line x1="{x:g}" y1="{TOP - 4}" x2="{x:g}" y2="{height - 4}" class="scale-break"/>'
            f'<text x="{x - 3:g}" y="{TOP - 18}" class="axis" text-anchor="end">narrower past here: h_q above '
            f"{WIDE_UP_TO} at {NARROW_W / WIDE_W:.2g}× the width</text>"
        )
    shapes: list[_Shape] = []
    # The previous row's shapes, by what they cover and say.
    open_shapes: dict[tuple[int, int, Outcome | None, str], _Shape] = {}
    previous: KernelSMResult | None = None
    for row, (version, result) in enumerate(rows):
        y = TOP + row * CELL_H
        out.append(f'<text x="4" y="{y + CELL_H - 4}" class="release">{escape(version)}</text>')
        still_open = {}
        for start, run, outcome, said in _runs(heads, result):
            template, place = _placed(_without_release(said, version))
            ident = (start, len(run), outcome, template)
            shape = open_shapes.get(ident)
            if shape is not None:
                shape.last = row
            else:
                shape = _Shape(row, row, start, run, outcome, said, template)
                shapes.append(shape)
            if place:
                shape.places.setdefault(place, []).append(version)
            still_open[ident] = shape
        open_shapes = still_open
        change = _change(previous, result)
        if change:
            changes.append(f"Δ {version}: {change}")
            out.append(
                f'<text x="{xs[-1] + 6:g}" y="{y + CELL_H - 4}" class="change">Δ<title>{escape(version)}: '
                f"{escape(change)}</title></text>"
            )
        previous = result
    for shape in shapes:
        first, last, run = shape.first, shape.last, shape.heads
        span = f"{run[0]}" if len(run) == 1 else f"{run[0]}-{run[-1]}"
        named = rows[first][0] if first == last else f"{rows[first][0]} – {rows[last][0]} ({last - first + 1})"
        said = shape.said if first == last else shape.template
        if first != last and shape.places:
            said += " (" + "; ".join(f"{place}: {_span(versions)}" for place, versions in shape.places.items()) + ")"
        tip = f"flashinfer {named}, h_q {span.replace('-', '–')}: {said}"
        x0, x1 = xs[shape.start], xs[shape.start + len(run)]
        # The colour comes from the outcome's class (the stylesheet), once per page, not per shape.
        out.append(
            f'<rect x="{x0:g}" y="{TOP + first * CELL_H}" width="{x1 - x0:g}" '
            f'height="{CELL_H * (last - first + 1) - 2}" '
            f'data-heads="{span}" data-rows="{last - first + 1}" '
            f'class="o-{shape.outcome.value if shape.outcome else "unprobed"}"><title>{escape(tip)}</title></rect>'
        )
        # Told apart by more than shade: the outcome's mark in every shape wide
        # enough to hold it (accepted and rejected are told by green and grey).
        if shape.outcome not in (Outcome.ACCEPTED, Outcome.REJECTED) and x1 - x0 >= MARK_MIN_W:
            mark = shape.outcome.mark if shape.outcome else "·"
            middle = TOP + first * CELL_H + (CELL_H * (last - first + 1) - 2) / 2 + 4
            out.append(f'<text x="{(x0 + x1) / 2:g}" y="{middle:g}" class="mark">{escape(mark)}</text>')
    out.append("</svg>")
    if changes:
        out.append(f'<p class="changes">{escape("; ".join(changes))}</p>')
    return "".join(out)


# A message's place as `_why` writes it: " (flashinfer/mla/_core.py:878 (_check...))" at the end.
_PLACE = re.compile(r" \(([\w./-]+\.py:\d+(?: \([^()]*\))?)\)$")


def _placed(said: str) -> tuple[str, str]:
    """(what was said without its file:line, the file:line)."""
    m = _PLACE.search(said)
    return (said[: m.start()], m.group(1)) if m else (said, "")


def _places(spots: dict[str, list[str]]) -> str:
    """Where a refusal was raised, with the releases at each place when there are several."""
    return "; ".join(f"{place}: {_span(vs)}" if len(spots) > 1 else place for place, vs in spots.items())


def _span(versions: list[str]) -> str:
    return versions[0] if len(versions) == 1 else f"{versions[0]} – {versions[-1]}"


def _runs(heads: list[int], result: KernelSMResult | None) -> list[tuple[int, list[int], Outcome | None, str]]:
    """(index of the first h_q, the h_q, their outcome, what each got) for each
    run of consecutive h_q answered alike; one h_q's answer is its own words,
    a run's says it once with `#` for the h_q it names."""
    runs: list[tuple[int, list[int], Outcome | None, str]] = []  # the answer as a template
    singles: dict[int, str] = {}  # a run's first answer in its own words
    for i, h in enumerate(heads):
        outcome = result.outcome(h) if result is not None else Outcome.ABSENT
        said = _answer(h, result)
        template = without_count(said, h)
        if runs and runs[-1][1][-1] + 1 == h and runs[-1][2] == outcome and runs[-1][3] == template:
            runs[-1][1].append(h)
        else:
            runs.append((i, [h], outcome, template))
            singles[i] = said
    return [(start, hs, outcome, singles[start] if len(hs) == 1 else template) for start, hs, outcome, template in runs]


def _answer(h: int, result: KernelSMResult | None) -> str:
    if result is None or h not in result.heads:
        return "not probed"
    hr = result.heads[h]
    text = hr.outcome.value
    if hr.outcome is Outcome.ACCEPTED and hr.entry:
        text += f" — reached {hr.entry}"
    elif hr.error_type or hr.message:
        text += " — " + _why(hr).split(": ", 1)[-1]
    elif hr.reason:
        text += f" — {hr.reason}"
    return text


def _why(hr: HeadResult) -> str:
    text = hr.outcome.value
    if hr.error_type or hr.message:
        text += f": {hr.error_type or ''}: {hr.message or ''}".replace(": : ", ": ")
    elif hr.reason:
        text += f": {hr.reason}"
    return text + (f" ({hr.location})" if hr.location else "")


def _change(previous: KernelSMResult | None, result: KernelSMResult | None) -> str:
    if previous is None or result is None:
        return ""
    before, after = set(previous.accepted()), set(result.accepted())
    parts = []
    if after - before:
        parts.append(f"+{compact_set(after - before)}")
    if before - after:
        parts.append(f"−{compact_set(before - after)}")
    return " ".join(parts)


def _evidence(rows: list[tuple[str, KernelSMResult | None]]) -> str:
    """The evidence table: one row per run of consecutive releases that say
    the same (accepted set, refusals, caveats), named by its first and last. A
    refusal that only moved (another file:line) is the same refusal: its places
    are listed with their releases. Evidence the row above gave is "as above"."""
    runs: list[tuple[list[str], tuple[str, tuple[str, ...], str], list[dict[str, list[str]]]]] = []
    for version, result in rows:
        if result is None:
            said: tuple[str, tuple[str, ...], str] = ("–", ("not probed",), "")
            places: list[str] = [""]
        else:
            refused = [
                _placed(f"{compact_set(hs)}: {_why(hr)}")
                for outcome in (
                    Outcome.REJECTED,
                    Outcome.UNSUPPORTED_ARCH,
                    Outcome.UNSUPPORTED_CONFIG,
                    Outcome.ABSENT,
                    Outcome.INCONCLUSIVE,
                )
                for hs, hr in result.refusal_groups(outcome)[:4]
            ]
            said = (compact_set(result.accepted()), tuple(text for text, _ in refused), "\n".join(result.caveats()))
            places = [place for _, place in refused]
        if runs and runs[-1][1] == said:
            runs[-1][0].append(version)
        else:
            runs.append(([version], said, [{} for _ in places]))
        for where, place in zip(runs[-1][2], places, strict=True):
            if place:
                where.setdefault(place, []).append(version)
    lines = [
        '<table class="evidence"><thead><tr><th>release</th><th>accepted h_q</th><th>refused '
        "by</th><th>caveats</th></tr></thead><tbody>"
    ]
    above: tuple[str, ...] = ()
    for versions, (accepted, refusals, caveats), wheres in runs:
        named = (
            escape(versions[0])
            if len(versions) == 1
            else f"{escape(versions[0])} – {escape(versions[-1])} ({len(versions)})"
        )
        refused_html = "<br>".join(
            escape(text) + (f' <span class="where">({escape(_places(spots))})</span>' if spots else "")
            for text, spots in zip(refusals, wheres, strict=True)
        )
        cells = (escape(accepted), refused_html, escape(caveats).replace("\n", "<br>"))
        # Evidence the row above gave already is said once.
        shown = [
            text if not text or i >= len(above) or text != above[i] else '<span class="same">as above</span>'
            for i, text in enumerate(cells)
        ]
        above = cells
        lines.append(f"<tr><td>{named}</td><td>{shown[0]}</td><td>{shown[1]}</td><td>{shown[2]}</td></tr>")
    lines.append("</tbody></table>")
    return "".join(lines)


_CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #222; max-width: 1200px; }
table { max-width: 100%; } .evidence td:nth-child(3), .evidence td:nth-child(4) { overflow-wrap: anywhere; }
.evidence td:first-child { white-space: nowrap; }
.same { color: #888; font-style: italic; } .where { color: #666; font-size: 11px; }
h2 { margin-top: 2em; border-bottom: 1px solid #ccc; }
.legend { list-style: none; padding: 0; display: flex; gap: 1.2em; flex-wrap: wrap; }
.swatch { display: inline-block; width: 1.4em; text-align: center; border: 1px solid #999; }
.textures { position: absolute; }
/* scaled down to a narrow window, never scrolled sideways */
.heatmap { display: block; margin: .5em 0; max-width: 100%; height: auto; }
.heatmap .mark { font: bold 10px monospace; fill: #fff; text-anchor: middle; pointer-events: none; }
.heatmap .o-absent + .mark, .heatmap .o-unprobed + .mark { fill: #333; }
.heatmap .scale-break { stroke: #333; stroke-dasharray: 2 2; }
.changes { font: 11px monospace; color: #a0522d; margin: 0 0 .5em 0; }
.heatmap .axis, .heatmap .release, .heatmap .change { font: 11px monospace; fill: #333; }
.heatmap .change { fill: #a0522d; } .change-mark { color: #a0522d; font-family: monospace; }
.evidence, .verdicts { border-collapse: collapse; font-size: 12px; margin-bottom: 1em; }
.verdicts td, .verdicts th { border: 1px solid #ddd; padding: 2px 6px; }
.verdicts caption { text-align: left; font-weight: bold; padding: 4px 0; }
.verdicts tr.in-pin th:first-child { background: #e8f0fe; }
.verdicts th { font-weight: normal; font-size: 11px; }
.evidence td, .evidence th { border: 1px solid #ddd; padding: 2px 6px; text-align: left; vertical-align: top; }
"""
