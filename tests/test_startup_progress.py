"""Start-up says what it does (issue 35): a large store's first reading and labelling is a
progress bar on the terminal, then one line with the count, before the dashboard's URL."""

from __future__ import annotations

from conftest import caught_up_store


def test_the_first_catch_up_reports_its_progress_and_a_large_store_gets_a_bar(tmp_path, capsys,
                                                                               monkeypatch):
    from tealeaves.app.dashboard import history as history_mod
    from tealeaves.app.dashboard import server
    from tealeaves.app.dashboard.history import History
    from tealeaves.data import bundled_trace_path
    from tealeaves.data.traces import read_trace

    tr = read_trace(bundled_trace_path())
    store, _ = caught_up_store(tr, tmp_path / "s.db")
    monkeypatch.setattr(history_mod, "READ_CHUNK", 1000)  # several chunks of the small store
    seen: list[tuple[int, int]] = []
    h = History(store, server_lag_s=0.0)
    h.on_progress = lambda done, total: seen.append((done, total))
    h.update(force=True)
    top = store.cursor()
    assert len(seen) >= 3 and all(total == top for _, total in seen)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen) and seen[-1][0] == len(tr.samples)
    n = len(seen)
    h.update(force=True)  # later updates read only what is new: no progress calls
    assert len(seen) == n
    store.close()

    # the bar: nothing for a small store, a bar and one line for a large one
    small = server._HistoryBar()
    small(10, server.PROGRESS_FROM_ROWS - 1)
    small.close()
    assert capsys.readouterr().out == ""
    big = server._HistoryBar()
    total = server.PROGRESS_FROM_ROWS * 2
    for done in range(0, total + 1, total // 4):
        big(done, total)
    big.close()
    out = capsys.readouterr()
    assert f"tealeaves: {total:,} stored samples read and labelled in" in out.out
    assert "reading and labelling the store" in out.err


def test_classify_says_it_is_labelling_a_long_trace_on_a_terminal_only():
    import fcntl
    import io
    import os
    import pty
    import struct
    import sys
    import termios

    from tealeaves.app.cli import common

    assert common.Working(common.WORKING_FROM_ROWS - 1, "labelling").bar is None
    # on a terminal: the bar names the step
    main_fd, tty_fd = pty.openpty()
    fcntl.ioctl(tty_fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))
    old = sys.stderr
    sys.stderr = io.TextIOWrapper(os.fdopen(tty_fd, "wb", buffering=0), write_through=True)
    try:
        w = common.Working(common.WORKING_FROM_ROWS, "labelling 9 samples")
        assert w.bar is not None and not w.bar.disable
        w.close()
    finally:
        sys.stderr.close()
        sys.stderr = old
    text = os.read(main_fd, 65536).decode(errors="replace")
    os.close(main_fd)
    assert "labelling 9 samples" in text, text
