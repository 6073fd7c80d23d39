"""`hprobe kernels`, `hprobe env`, `hprobe models` and `hprobe table
extract`: what hprobe can probe, what this machine is, the models it knows,
and the padding table a tree holds."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from hprobe.model.release import Progress, quiet

if TYPE_CHECKING:
    from hprobe.model.padding import Model
    from hprobe.report.catalogue import KernelsReport, RecordsReport
    from hprobe.rules.repo.extract import RepoTables


def kernels_report(releases: str | None, progress: Progress = quiet) -> KernelsReport:
    from hprobe.report.catalogue import KernelsReport

    return KernelsReport(kernel_rows(releases, progress))


def env_report() -> RecordsReport:
    """This machine: GPUs and their SM, CUDA as torch sees it, versions."""
    from hprobe.report.catalogue import RecordsReport
    from hprobe.system.envinfo import collect

    info = collect()
    shown = {k: v for k, v in info.items() if k != "gpus"}
    shown["gpus"] = ", ".join(f"{g['index']}: {g['name']} (SM{g['sm']})" for g in info["gpus"]) or "none visible"
    return RecordsReport(
        "hprobe env", {"schema": "hprobe.env/1", **info}, {k: ("-" if v is None else v) for k, v in shown.items()}
    )


def models_report() -> RecordsReport:
    """The models hprobe knows, with the config each count comes from: MLA ones
    (`check --model`) and GQA/MHA ones with each kind of layer (`matrix --model`)."""
    from hprobe.report.catalogue import RecordsReport
    from hprobe.rules.models import every_model

    rows = every_model()
    document = {
        "schema": "hprobe.models/1",
        "models": [
            {
                "name": m.name,
                "num_q_heads": m.num_q_heads,
                "tp": list(m.tp),
                "families": list(m.families),
                **(
                    {
                        "layers": [
                            {
                                "name": la.name,
                                "num_kv_heads": la.num_kv_heads,
                                "head_dim": la.head_dim,
                                "sinks": la.sinks,
                            }
                            for la in m.layers
                        ]
                    }
                    if m.layers
                    else {}
                ),
                "citation": m.citation,
            }
            for m in rows
        ],
    }
    shown = {m.name: _model_line(m) for m in rows}
    return RecordsReport("hprobe models", document, shown)


def _model_line(m: Model) -> str:
    tp = f"TP {'/'.join(map(str, m.tp))}"
    if not m.layers:
        return f"{m.num_q_heads} query heads, {tp}, paths {', '.join(m.families) or 'every'}; {m.citation}"
    layers = ", ".join(
        f"{la.name + ' ' if len(m.layers) > 1 else ''}{la.num_kv_heads} KV heads of dim {la.head_dim}"
        f"{' with sinks' if la.sinks else ''}"
        for la in m.layers
    )
    return f"{m.num_q_heads} query heads, {layers}, {tp}; {m.citation}"


def extract_report(found: RepoTables) -> RecordsReport:
    """`table extract --json`: what was found, as hprobe.extract/1."""
    from hprobe.report.catalogue import RecordsReport

    return RecordsReport("extract", {"schema": "hprobe.extract/1", **found.to_dict()})


def kernel_rows(releases: str | None, progress: Progress = quiet) -> list[dict[str, Any]]:
    """One row per probe: its entry point, SMs and axes, whether the installed
    flashinfer defines the entry point and, with `releases`, which of them do."""
    from hprobe.kernels import PROBES
    from hprobe.support.presence import entry_point_present, releases_with_entry_points

    present_in = (
        releases_with_entry_points(releases, [p.entry_point for p in PROBES.values()], progress) if releases else None
    )
    rows = []
    for probe in PROBES.values():
        row: dict[str, Any] = {
            "id": probe.id,
            "entry_point": probe.entry_point,
            "sms": list(probe.default_sms),
            "axes": [
                {"name": a.name, "default": a.default, "choices": list(a.choices), "sweep": a.sweep, "help": a.help}
                for a in probe.axes
            ],
            "summary": probe.summary,
            "installed_flashinfer_has_entry_point": entry_point_present(probe.entry_point),
        }
        if present_in is not None:
            have = present_in[probe.entry_point]
            row["releases"] = ", ".join(v for v, ok in have.items() if ok) or "none probed"
            row["releases_without"] = [v for v, ok in have.items() if not ok]
        rows.append(row)
    return rows


def extract_table(
    repo: Path,
    mapping: Path | None,
    exclude: tuple[str, ...],
    settings: dict[str, str],
    flashinfer: str | None,
    model: str | None = None,
) -> RepoTables:
    """The padding table read from `repo`; rules that read flashinfer's own
    tables are evaluated against `flashinfer`, else the release the repo's pin
    names exactly, else the installed one. `model`: --model, the models of
    hprobe's table to write it for."""
    from hprobe.commands.request import check_release_options, single_release
    from hprobe.rules import overridden_models
    from hprobe.rules.models import pick_models, shipped_models
    from hprobe.rules.repo.extract import extract_any
    from hprobe.rules.repo.tree.mapping import load_mapping

    if flashinfer is not None:
        check_release_options(flashinfer, None)
    picked = pick_models(list(shipped_models()), [m.strip() for m in model.split(",") if m.strip()]) if model else None
    chosen = load_mapping(mapping) if mapping is not None else None
    found = extract_any(
        repo,
        chosen,
        exclude,
        None,
        settings,
        (lambda models: overridden_models(models, None, None, picked)) if picked else None,
    )
    if found.per_release:
        from hprobe.support.gather import release_reader
        from hprobe.support.trees import parse_spec

        label = parse_spec(flashinfer)[-1] if flashinfer else single_release(found.pin.spec if found.pin else None)
        found = found.against(release_reader(label), label)
    return found
