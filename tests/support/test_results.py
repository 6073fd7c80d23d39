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


def test_a_run_for_fewer_sms_reads_what_a_wider_run_kept(cli_json, cubin_wheel, tmp_path, monkeypatch):
    import hprobe.compiled.depth
    import hprobe.support.gather

    monkeypatch.setenv("HPROBE_CACHE_DIR", str(tmp_path / "cache"))
    # The table from the session's wheel: with an empty cache it would be fetched
    # from the index here, and a network that fails that fetch is no answer about
    # what a run keeps.
    monkeypatch.setenv("HPROBE_KERNEL_TABLE", str(cubin_wheel))
    args = ("matrix", "-k", "trtllm-mla[backend=trtllm-gen]", "-k", "dsv4-sparse-mla", "--heads", "1-128")
    code, every, err = cli_json(*args, "--sm", SMS)
    assert code == 0, err
    compiled = [r for r in every["results"] if r["depth"] == "compiled"]
    assert compiled, every["results"][0]["notes"]  # compiled depth's conclusions are kept too

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


def test_two_runs_sharing_a_cache_probe_a_release_once(tmp_path, monkeypatch):
    """Runs that share a cache (CI jobs on one runner, a suite's workers) and
    ask a release at the same time: one probes it, the other waits for the
    answers it keeps and reads them, instead of probing it beside it."""
    import threading

    import hprobe.support.results as results
    from hprobe.support.trees import resolve

    release = resolve("0.6.14")  # fetched into the suite's cache; the answers go to an empty one
    monkeypatch.setenv("HPROBE_CACHE_DIR", str(tmp_path / "cache"))
    real = results._run_worker
    workers: list[str] = []
    first_in = threading.Event()

    def counted(*args, **kwargs):
        workers.append(threading.current_thread().name)
        first_in.set()
        threading.Event().wait(0.5)  # the other run asks while this one probes
        return real(*args, **kwargs)

    monkeypatch.setattr(results, "_run_worker", counted)
    answers: dict[str, list] = {}

    def ask(name: str) -> None:
        answers[name] = results.probe_release(release, ["dsv4-sparse-mla"], [100], [16, 64, 128])

    first = threading.Thread(target=ask, args=("first",), name="first")
    first.start()
    assert first_in.wait(60)
    second = threading.Thread(target=ask, args=("second",), name="second")
    second.start()
    first.join(300)
    second.join(300)
    assert workers == ["first"]
    assert answers["first"] == answers["second"]
    assert not list((tmp_path / "cache" / "results").glob(".*.lock"))  # no file left per question asked
    assert {n: h.outcome.value for n, h in answers["second"][0].heads.items()} == dict.fromkeys(
        (16, 64, 128), "accepted"
    )


def test_a_run_waiting_on_another_runs_probe_stops_when_it_unwinds(tmp_path, monkeypatch):
    """A thread waiting for another run's probe never sees Ctrl-C: once the
    main thread unwinds (kill_running sets the flag), it stops waiting within
    a slice and holds nothing (what it would start then, bounded refuses)."""
    import threading
    import time

    from hprobe.support import results
    from hprobe.system import bounded

    monkeypatch.setenv("HPROBE_CACHE_DIR", str(tmp_path / "cache"))
    question = ("a" * 64, ["dsv4-sparse-mla"], [100], [64])
    held, let_go = threading.Event(), threading.Event()

    def hold() -> None:
        with results._probing(*question):
            held.set()
            let_go.wait(60)

    holder = threading.Thread(target=hold)
    holder.start()
    assert held.wait(30)
    seen: dict[str, object] = {}

    def wait() -> None:
        start = time.monotonic()
        with results._probing(*question) as waited:
            seen["waited"] = waited
        seen["took"] = time.monotonic() - start

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(1.5)
    assert waiter.is_alive()  # waiting on the holder
    bounded._STOPPING.set()  # what kill_running sets while the main thread unwinds
    try:
        waiter.join(10)
        stopped = not waiter.is_alive()
    finally:
        bounded.resume()
        let_go.set()
        holder.join(30)
    assert stopped and seen["waited"] is False and float(seen["took"]) < 6  # type: ignore[arg-type]
