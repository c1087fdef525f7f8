"""Record nvtop's screen as a stream while a labelled workload runs (issue 37's ground truth).

nvtop is a full-screen curses program: it redraws its header (per GPU: name, PCIe, clocks,
temperature, fan, power, GPU% and MEM% bars) and its charts of the last minutes on every
update.  Its terminal bytes, each chunk stamped with the wall-clock time it arrived, are
enough to rebuild the screen of any moment: replayed up to that time in a real ``xterm`` of
the same size and taken with ``scrot``, they give a real picture whose moment is known, and
the collector's trace of the same run is the telemetry of that moment.

Writes ``OUT/NAME.nvtop.jsonl``: a first object ``{"argv", "cols", "rows", "t0"}``, then one
``{"t", "data"}`` per chunk read (``data``: the bytes as latin-1 text, escapes kept).  Several
recordings run side by side (sizes, update intervals, plot directions) without disturbing the
GPU: nvtop reads NVML a few times a second.  Stdlib only (it runs on the GPU machine).

Usage: ``python -m tealeaves.kernels_bench.nvtop_capture --out DIR --name N --cols 160 --rows
48 --seconds 120 -- nvtop -d 10``.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import select
import signal
import sys
import time
from pathlib import Path

from tealeaves.kernels_bench.monitor_capture import spawn_in_pty


def record(argv: list[str], cols: int, rows: int, seconds: float, out: Path) -> int:
    """Run ``argv`` in a pseudo-terminal of ``cols`` x ``rows`` for ``seconds``, writing
    its stamped output to ``out``; returns the number of chunks written.  The program is asked
    to quit with ``q`` at the end (then killed if it does not)."""
    pid, fd = spawn_in_pty(argv, cols, rows)
    n = 0
    end = time.monotonic() + seconds
    with open(out, "w") as f:
        f.write(json.dumps({"argv": argv, "cols": cols, "rows": rows, "t0": time.time()}) + "\n")
        quit_sent = None
        while True:
            now = time.monotonic()
            if quit_sent is None and now >= end:
                os.write(fd, b"q")
                quit_sent = now
            if quit_sent is not None and now - quit_sent > 3.0:
                os.kill(pid, signal.SIGKILL)
                break
            r, _, _ = select.select([fd], [], [], 0.1)
            if fd in r:
                try:
                    chunk = os.read(fd, 65536)
                except OSError as exc:  # EIO: the child closed the terminal
                    if exc.errno == errno.EIO:
                        break
                    raise
                if not chunk:
                    break
                f.write(json.dumps({"t": time.time(), "data": chunk.decode("latin-1")}) + "\n")
                n += 1
            else:
                done, _ = os.waitpid(pid, os.WNOHANG)
                if done:
                    pid = 0
                    break
    if pid:
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
    os.close(fd)
    return n


def main(argv: list[str] | None = None) -> int:
    """The command line: see the module docstring."""
    ap = argparse.ArgumentParser(prog="python -m tealeaves.kernels_bench.nvtop_capture",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="folder to write")
    ap.add_argument("--name", required=True, help="recording name (file NAME.nvtop.jsonl)")
    ap.add_argument("--cols", type=int, default=160)
    ap.add_argument("--rows", type=int, default=48)
    ap.add_argument("--seconds", type=float, default=120.0)
    ap.add_argument("cmd", nargs=argparse.REMAINDER, help="-- nvtop [options]")
    args = ap.parse_args(argv)
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        ap.error("give the command after --")
    args.out.mkdir(parents=True, exist_ok=True)
    n = record(cmd, args.cols, args.rows, args.seconds, args.out / f"{args.name}.nvtop.jsonl")
    print(f"{args.name}: {n} chunks", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
