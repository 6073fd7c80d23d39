"""Padding tables written as TOML, the inverse of `toml_source`: what it writes,
`TomlTableSource` reads back to the same table (names, models, backends, rules,
axis values, pin). A rule entry that pads a count *down* is no padding rule
the reader accepts: it is left out and said in a comment, never written."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hprobe.model.padding import Backend, NoPadding, PaddingRule, PaddingTable, PadMap, PadMultiple, PadTile, PadTo
from hprobe.system.escaping import toml_escapes, visible


def table_toml(
    table: PaddingTable,
    header: Sequence[str] = (),
    backend_comments: dict[str, str] | None = None,
    footer: Sequence[str] = (),
) -> str:
    """The table as TOML; `header`, `footer` and per-backend comments are
    written as `#` lines (one line each, whatever they contain)."""
    lines = [comment(h) for h in header]
    lines += ["", "[table]", f"name = {quote(table.name)}", f"source = {quote(table.source)}"]
    if table.requires_flashinfer:
        lines.append(f"requires_flashinfer = {quote(table.requires_flashinfer)}")
    if table.provenance:
        lines.append("provenance = [")
        lines += [
            f"  {{ engine = {quote(p.engine)}, release = {quote(p.release)}, file = {quote(p.file)}, line = {p.line}, "
            f"says = {quote(p.says)} }},"
            for p in table.provenance
        ]
        lines.append("]")
    for model in table.models:
        lines += [
            "",
            "[[model]]",
            f"name = {quote(model.name)}",
            f"num_q_heads = {model.num_q_heads}",
            f"tp = [{', '.join(map(str, model.tp))}]",
        ]
        if model.families:
            lines.append(f"families = [{', '.join(quote(f) for f in model.families)}]")
        if model.attributes:
            lines.append("attributes = { " + ", ".join(f"{k} = {_value(v)}" for k, v in model.attributes) + " }")
    for backend in table.backends:
        lines.append("")
        note = (backend_comments or {}).get(backend.name)
        if note:
            lines.append(comment(note))
        lines += _backend(backend)
    lines += [comment(f) for f in footer]
    return "\n".join(lines).lstrip("\n") + "\n"


def _backend(backend: Backend) -> list[str]:
    lines = [
        "[[backend]]",
        f"name = {quote(backend.name)}",
        f"kernel = {quote(backend.kernel)}",
        f"sm = [{', '.join(map(str, backend.sms))}]",
    ]
    for key, value in backend.options:
        lines.append(f"{key} = {quote(value) if isinstance(value, str) else value}")
    if backend.models:
        lines.append(f"models = [{', '.join(quote(m) for m in backend.models)}]")
    if backend.counts:
        lines.append(f"counts = [{', '.join(map(str, backend.counts))}]")
    if backend.tps:
        lines.append(f"tps = [{', '.join(map(str, backend.tps))}]")
    if backend.reach is not None:
        r = backend.reach
        known = "" if r.default_reaches is None else f", default_reaches = {'true' if r.default_reaches else 'false'}"
        when = f", default_when = {quote(r.default_when)}" if r.default_when else ""
        lines.append(
            f"reach = {{ flag = {quote(r.flag)}, value = {quote(r.value)}, default = {quote(r.default)}{known}, "
            f"otherwise = {quote(r.otherwise)}, source = {quote(r.source)}{when} }}"
        )
    return lines + _rule(backend.rule)


def _rule(rule: PaddingRule) -> list[str]:
    if isinstance(rule, NoPadding):
        return ["no_padding = true"]
    if isinstance(rule, PadTo):
        return [f"pad_to = [{', '.join(map(str, rule.values))}]"]
    if isinstance(rule, PadMultiple):
        return [f"pad_multiple = {rule.multiple}"] + ([f"max_heads = {rule.limit}"] if rule.limit else [])
    if isinstance(rule, PadTile):
        return ["pad_tile = [" + ", ".join(f"[{upto}, {tile}]" for upto, tile in rule.tiles) + "]"]
    assert isinstance(rule, PadMap)
    kept = [(n, v) for n, v in rule.mapping if v >= n]
    down = [(n, v) for n, v in rule.mapping if v < n]
    lines = [comment(f"not written: pads {n} down to {v}") for n, v in down]
    return lines + ["pad_map = { " + ", ".join(f'"{n}" = {v}' for n, v in kept) + " }"]


def _value(value: bool | int | str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value) if isinstance(value, int) else quote(value)


def quote(value: Any) -> str:
    """A TOML basic string that reads back equal: `"` and `\\` escaped; the
    characters TOML forbids raw and those a terminal would act on (controls,
    separators, bidi overrides) as `\\uXXXX`, as is the `#` of `##[`; every
    other character (beyond the Basic Multilingual Plane too) as itself. A lone
    surrogate (a file name's undecodable byte) has no TOML spelling: it is
    written as U+FFFD."""
    return '"' + toml_escapes(str(value).replace("\\", "\\\\").replace('"', '\\"')) + '"'


def comment(value: Any) -> str:
    """A `#` line: one line, whatever the text holds (what a terminal would act
    on, and lone surrogates, shown as `\\xNN` or `\\uXXXX`)."""
    text = visible(" ".join(str(value).split()))
    return text if text.startswith("#") else f"# {text}" if text else "#"
