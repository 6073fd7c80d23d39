"""A mark never outlives its qualification: the caveats of an accepted answer
("validators only", "partial", "built for another SM family") are shown
wherever its cells are — the list, `--grid`, `--pivot`, release columns and
the report page."""

from __future__ import annotations

from hprobe.model.outcome import Depth, HeadResult, KernelSMResult, Outcome
from hprobe.report.formats.html_site import _evidence


def _result(
    depth: Depth = Depth.VALIDATORS, unchecked: list[str] | None = None, accepted: bool = True
) -> KernelSMResult:
    outcome = Outcome.ACCEPTED if accepted else Outcome.REJECTED
    heads = {h: HeadResult(h, outcome, entry="mod.fn" if accepted else None) for h in (64, 128)}
    return KernelSMResult("dsv4-sparse-mla", 120, "0.6.13", depth, heads, unchecked=list(unchecked or []))


def test_caveats_of_accepted_answers_only():
    assert _result(unchecked=["SM120 reaches x, built for SM10x"]).caveats() == [
        "validators only: SM120 reaches x, built for SM10x"
    ]
    assert _result(Depth.PARTIAL).caveats()[0].startswith("partial:")
    assert _result(Depth.FAKED_DEVICE).caveats()[0].startswith("faked device:")
    assert _result(unchecked=["anything"], accepted=False).caveats() == []  # nothing accepted, nothing to qualify


def test_the_report_page_carries_each_caveat_escaped():
    html = _evidence([("0.6.13", _result(unchecked=['picks a cubin <by> "h_q"']))])
    assert "<th>caveats</th>" in html
    assert "validators only: picks a cubin &lt;by&gt; &quot;h_q&quot;" in html


def test_grid_and_pivot_keep_the_caveats(cli):
    for layout in (["--grid"], ["--pivot", "heads,sm"]):
        code, out, err = cli(
            "matrix", "-k", "trtllm-mla[backend=cute-dsl]", "--sm", "100,120", "--heads", "62-66", *layout
        )
        assert code == 0, err
        caveats = out.split("caveats on accepted cells\n", 1)[1]
        # One caveat, said once after every cell it qualifies.
        assert "trtllm-mla[backend=cute-dsl] SM100/SM120: validators only: cute-dsl compiles the kernel" in caveats
