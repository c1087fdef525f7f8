"""app.dashboard.inflight.SingleFlight: a retry of a request still being answered waits for
that answer instead of computing it again (the dashboard's slow-request retries)."""

from __future__ import annotations

import threading

import pytest

from tealeaves.app.dashboard.inflight import SingleFlight


def test_a_retry_while_the_first_runs_gets_its_result_and_computes_nothing():
    flights = SingleFlight()
    started, release = threading.Event(), threading.Event()
    calls = []

    def slow():
        calls.append(1)
        started.set()
        release.wait(30)
        return "answer"

    first: list = []
    t = threading.Thread(target=lambda: first.append(flights.run("k", slow)))
    t.start()
    assert started.wait(30)
    second: list = []
    t2 = threading.Thread(target=lambda: second.append(flights.run("k", lambda: 1 / 0)))
    t2.start()
    while flights.joined == 0:  # the retry has joined the running computation
        t2.join(0.01)
    release.set()
    t.join(30)
    t2.join(30)
    assert first == second == ["answer"] and calls == [1]


def test_a_retry_just_after_the_end_is_answered_from_the_kept_result():
    flights = SingleFlight(keep=1)
    assert flights.run("k", lambda: 1) == 1
    assert flights.run("k", lambda: 2) == 1  # a retry of the same request
    assert flights.run("j", lambda: 3) == 3
    assert flights.run("k", lambda: 4) == 4  # only the last key is kept


def test_without_keep_only_a_running_computation_is_shared():
    flights = SingleFlight(keep=0)
    assert flights.run("k", lambda: 1) == 1
    assert flights.run("k", lambda: 2) == 2


def test_a_failure_reaches_the_caller_and_is_not_kept():
    flights = SingleFlight()

    def boom():
        raise RuntimeError("store closed")

    with pytest.raises(RuntimeError, match="store closed"):
        flights.run("k", boom)
    assert flights.run("k", lambda: "again") == "again"
    with pytest.raises(ValueError, match="keep"):
        SingleFlight(keep=-1)
