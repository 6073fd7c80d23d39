"""kernels/xqa_mla: XQA's MLA decode on the installed flashinfer (0.6.14), on CPU:
SM12x only, 128 query heads only, each refusal with the release's message."""

from __future__ import annotations


def _results(doc: dict) -> dict[tuple[str, int], dict]:
    return {(r["key"], r["sm"]): r for r in doc["results"]}


def test_xqa_mla_on_sm120_accepts_exactly_128(cli_json):
    code, doc, _ = cli_json("matrix", "-k", "xqa-mla", "--sm", "120,100")
    assert code == 0
    results = _results(doc)
    sm120 = results[("xqa-mla", 120)]
    assert sm120["accepted"] == [128]
    sample = next(h for h in sm120["heads"] if h["heads"] == 64)
    assert sample["outcome"] == "rejected"
    assert "only supports 128 query heads" in sample["message"]
    assert results[("xqa-mla", 100)]["status"] == "unsupported-arch"
