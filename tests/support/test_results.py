"""Answers kept per kernel variant and SM (support/results.py, support/gather.py).

Keeping them per SM rests on one SM's answer not depending on which other SMs a
run asked for; the first test holds that on every kernel of the installed
release, the second that a run for a subset of SMs then probes and evaluates
nothing an every-SM run already kept."""

from __future__ import annotations

SMS = "90,100,103,120,121"


def _by_key_and_sm(doc: dict) -> dict[tuple[str, int], dict]:
    return {(r["key"], r["sm"]): r for r in doc["results"]}


def test_an_sms_answer_does_not_depend_on_the_others_asked(cli_json, tmp_path, monkeypatch):
    monkeypatch.setenv("HPROBE_CACHE_DIR", str(tmp_path / "cache"))
    code, every, err = cli_json("matrix", "--sm", SMS, "--no-cache")
    assert code == 0, err
    for sm in (100, 120):
        code, one, err = cli_json("matrix", "--sm", str(sm), "--no-cache")
        assert code == 0, err
        alone = _by_key_and_sm(one)
        assert alone and alone == {k: r for k, r in _by_key_and_sm(every).items() if k[1] == sm}


def test_a_run_for_fewer_sms_reads_what_a_wider_run_kept(cli_json, tmp_path, monkeypatch):
    import hprobe.compiled.depth
    import hprobe.support.gather

    monkeypatch.setenv("HPROBE_CACHE_DIR", str(tmp_path / "cache"))
    args = ("matrix", "-k", "trtllm-mla[backend=trtllm-gen]", "-k", "dsv4-sparse-mla", "--heads", "1-128")
    code, every, err = cli_json(*args, "--sm", SMS)
    assert code == 0, err
    assert any(r["depth"] == "compiled" for r in every["results"])  # compiled depth's conclusions are kept too

    def not_again(*_args, **_kwargs):
        raise AssertionError("probed or evaluated again what a wider run kept")

    with monkeypatch.context() as patch:
        patch.setattr(hprobe.support.gather, "_probe_in_process", not_again)
        patch.setattr(hprobe.compiled.depth, "deepen", not_again)
        code, fewer, err = cli_json(*args, "--sm", "100,120")
    assert code == 0, err
    assert _by_key_and_sm(fewer) == {k: r for k, r in _by_key_and_sm(every).items() if k[1] in (100, 120)}

    # An SM the wider run did not ask is probed; the kept ones are still read.
    probed: list[dict[str, list[int]]] = []
    real = hprobe.support.gather._probe_in_process

    def spy(needed, *rest, **kw):
        probed.append({k: list(v) for k, v in needed.items()})
        return real(needed, *rest, **kw)

    monkeypatch.setattr(hprobe.support.gather, "_probe_in_process", spy)
    code, more, err = cli_json(*args, "--sm", "100,110")
    assert code == 0, err
    assert probed and all(sms == [110] for sms in probed[0].values())
