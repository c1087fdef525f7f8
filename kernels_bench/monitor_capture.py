"""Capture the screens of the GPU monitors people screenshot, with the time of each, while a
labelled workload runs (issue 23's ground truth): ``nvidia-smi`` (its default table),
``nvidia-smi dmon`` (a stream, every line stamped on arrival), ``nvitop -1`` and ``gpustat``,
each run in a pseudo-terminal of a given size so it prints as it does on a screen, colours
included (ANSI escapes kept as bytes).  The collector's trace of the same run is the
telemetry of each moment; replaying a capture in a real terminal and screenshotting it gives
a real picture whose printed values are known.

Writes ``OUT/captures.jsonl``: one object per capture, ``{"tool", "t0", "t1"`` (epoch s
around the command), ``"cols"``, ``"rows"``, ``"rc"``, ``"text"`` (the terminal bytes as
latin-1 text)``}``; ``OUT/dmon.jsonl``: ``{"t", "line"}`` per line of one ``nvidia-smi dmon``
stream.  Needs the tools on ``PATH`` (nvitop and gpustat can be carried as wheels); a missing
one is recorded once with ``rc`` 127 and skipped.  Stdlib only.
"""

from __future__ import annotations

import argparse
import errno
import fcntl
import json
import os
import pty
import select
import shutil
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

#: The tools and how each is run, one shot each (nvitop and gpustat as modules of this
#: Python, so wheels carried onto ``PYTHONPATH`` serve).
TOOLS: dict[str, list[str]] = {
    "nvidia-smi": ["nvidia-smi"],
    "nvitop": [sys.executable, "-m", "nvitop", "-1"],
    "gpustat": [sys.executable, "-m", "gpustat", "--force-color", "--show-power",
                "--show-cmd"],
}
#: Terminal sizes captured in turn (columns, rows): the default 80 x 24 and a wide one.
SIZES: tuple[tuple[int, int], ...] = ((120, 40), (80, 30), (160, 48))


def spawn_in_pty(argv: list[str], cols: int, rows: int) -> tuple[int, int]:
    """Start ``argv`` with a pseudo-terminal of ``cols`` x ``rows`` as its terminal; return
    the child's pid and the terminal's file descriptor (the child exits 127 when the program
    cannot be started)."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: a terminal of that size, then the tool
        os.environ.update(TERM="xterm-256color", COLUMNS=str(cols), LINES=str(rows))
        try:
            os.execvp(argv[0], argv)
        finally:
            os._exit(127)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    return pid, fd


def run_in_pty(argv: list[str], cols: int, rows: int, timeout_s: float = 20.0
               ) -> tuple[int, bytes]:
    """Run ``argv`` with a pseudo-terminal of ``cols`` x ``rows`` as its stdout; return its
    exit status and everything it wrote (127 when the program is missing)."""
    if shutil.which(argv[0]) is None:
        return 127, b""
    pid, fd = spawn_in_pty(argv, cols, rows)
    out = bytearray()
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        r, _, _ = select.select([fd], [], [], 0.2)
        if fd in r:
            try:
                chunk = os.read(fd, 65536)
            except OSError as exc:  # EIO: the child closed the terminal
                if exc.errno == errno.EIO:
                    break
                raise
            if not chunk:
                break
            out += chunk
        else:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
    else:
        os.kill(pid, 9)
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), bytes(out)


def _dmon(out: Path, stop: threading.Event) -> None:
    """One ``nvidia-smi dmon -s pucm -o T`` stream, each line stamped when it arrives."""
    if shutil.which("nvidia-smi") is None:
        return
    p = subprocess.Popen(["nvidia-smi", "dmon", "-s", "pucm", "-o", "T"],
                         stdout=subprocess.PIPE, text=True, bufsize=1)
    with open(out / "dmon.jsonl", "w") as f:
        while not stop.is_set():
            line = p.stdout.readline()
            if not line:
                break
            f.write(json.dumps({"t": time.time(), "line": line.rstrip("\n")}) + "\n")
            f.flush()
    p.terminate()


def capture(out: Path, seconds: float, every_s: float) -> int:
    """Capture every tool in turn every ``every_s`` seconds for ``seconds``; returns the
    number of captures written."""
    out.mkdir(parents=True, exist_ok=True)
    stop = threading.Event()
    dmon = threading.Thread(target=_dmon, args=(out, stop), daemon=True)
    dmon.start()
    missing: set[str] = set()
    done = [0]
    end = time.time() + seconds
    with open(out / "captures.jsonl", "w") as f:
        try:
            _rounds(f, end, every_s, missing, done)
        except KeyboardInterrupt:  # the recording script's stop
            pass
    stop.set()
    dmon.join(timeout=5)
    return done[0]


def _rounds(f, end: float, every_s: float, missing: set[str], done: list[int]) -> None:
    """Capture rounds until ``end``: every tool at the next size; ``done[0]`` counts."""
    k = 0
    while time.time() < end:
        tick = time.time()
        cols, rows = SIZES[k % len(SIZES)]
        for tool, argv in TOOLS.items():
            if tool in missing:
                continue
            t0 = time.time()
            rc, data = run_in_pty(argv, cols, rows)
            t1 = time.time()
            if rc == 127:
                missing.add(tool)
            f.write(json.dumps({"tool": tool, "t0": t0, "t1": t1, "cols": cols, "rows": rows,
                                "rc": rc, "text": data.decode("latin-1")}) + "\n")
            f.flush()
            done[0] += 1
        k += 1
        time.sleep(max(0.0, every_s - (time.time() - tick)))


def main(argv: list[str] | None = None) -> int:
    """``python -m tealeaves.kernels_bench.monitor_capture --out DIR --seconds S``."""
    ap = argparse.ArgumentParser(prog="python -m tealeaves.kernels_bench.monitor_capture",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="folder to write")
    ap.add_argument("--seconds", type=float, default=60.0, help="how long (default 60)")
    ap.add_argument("--every", type=float, default=2.0,
                    help="seconds between rounds of captures (default 2)")
    args = ap.parse_args(argv)

    def _stop(*_):  # a background job of a script ignores SIGINT: TERM stops it cleanly
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _stop)
    n = capture(args.out, args.seconds, args.every)
    print(f"{n} captures in {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
