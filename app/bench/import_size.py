"""Import cost against file size (issue 38): seconds and peak memory of ``import_file`` on a
synthetic ``nvidia-smi dmon -o DT -s pucm`` file, each in a fresh process (so peak RSS is the
import's), for this tree and, given ``--baseline-root``, another checkout side by side.

Run: ``python -m tealeaves.app.bench.import_size --mb 50 [--baseline-root DIR]`` where DIR is
a tree exported from another commit (``git archive REV | tar -x -C DIR``).  Cost should grow
linearly with the file, and peak memory stay near the samples' own frame.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: dmon ``-o DT -s pucm`` header and units, as nvidia-smi 535 prints them.
HEADER = ("#Date       Time        gpu    pwr  gtemp  mtemp     sm    mem    enc    dec    jpg"
          "    ofa   mclk   pclk     fb   bar1   ccpm\n"
          "#YYYYMMDD   HH:MM:SS    Idx      W      C      C      %      %      %      %      %"
          "      %    MHz    MHz     MB     MB     MB\n")

_CHILD = """
import contextlib, io, json, os, sys, tempfile, time
t0 = time.perf_counter()
try:
    if sys.argv[2] == "store":  # `tealeaves import FILE --store DB --json`
        from tealeaves.app.cli import main
        db = os.path.join(tempfile.mkdtemp(prefix="tl_imp_"), "s.db")
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            rc = main(["import", sys.argv[1], "--store", db, "--json"])
        if rc:
            raise RuntimeError(f"exit status {rc}")
        doc = json.loads(buf.getvalue())
        f = doc["files"][0]
        out = {"rows": f["rows_read"], "samples": doc["stored"], "skipped": len(f["skipped"]),
               "error": None}
    else:  # import_file: the samples as one frame
        from tealeaves.data.importers import import_file
        r = import_file(sys.argv[1])
        out = {"rows": r.rows_read, "samples": len(r.samples), "skipped": len(r.skipped),
               "error": None}
except Exception as exc:  # the benchmark reports what the version did, whatever it was
    out = {"rows": 0, "samples": 0, "skipped": 0, "error": f"{type(exc).__name__}: {exc}"[:200]}
out["seconds"] = time.perf_counter() - t0
print(json.dumps(out))
"""


def write_dmon(path: Path, mb: float, gpus: int = 8) -> int:
    """Write a synthetic dmon file of about ``mb`` MB (1e6 bytes) at ``path``: ``gpus`` rows a
    second from 2024-01-01 00:00:00, every tenth power reading blank (``-``).  Returns the
    data lines written."""
    target = int(mb * 1e6)
    lines = 0
    with open(path, "w") as f:
        f.write(HEADER)
        size = len(HEADER)
        t = 0
        while size < target:
            block = []
            for _ in range(600):  # written 10 minutes at a time, each second whole
                hh, mm, ss = t // 3600 % 24, t // 60 % 60, t % 60
                day = 1 + t // 86400
                for g in range(gpus):
                    pwr = "-" if (t + g) % 10 == 0 else f"{300 + (t * 7 + g) % 400}"
                    line = (f"202401{day:02d}   {hh:02d}:{mm:02d}:{ss:02d}    {g:>3}  "
                            f"{pwr:>5}     45     50     {(t + g) % 101:>2}     20      0"
                            f"      0      0      0   2619   1980  40000      5      0\n")
                    block.append(line)
                    size += len(line)
                t += 1
                if size >= target:
                    break
            f.write("".join(block))
            lines += len(block)
    return lines


def measure(path: Path, root: str | None = None, how: str = "frame") -> dict:
    """Import ``path`` in a fresh Python (``root``: a tree to import ``tealeaves`` from, else
    this one): ``how`` ``"frame"`` with ``import_file`` (the samples as one frame) or
    ``"store"`` with ``tealeaves import`` into a new store.  Returns ``{"rows", "samples", "skipped", "error", "seconds", "peak_mb"}``
    (peak RSS of that process, MB)."""
    env = dict(os.environ)
    if root:
        pkg = Path(tempfile.mkdtemp(prefix="tl_base_"))
        (pkg / "tealeaves").symlink_to(Path(root).resolve())
        env["PYTHONPATH"] = str(pkg)
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(path), how], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    try:
        res = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        res = {"rows": 0, "samples": 0, "skipped": 0, "error": f"exit {proc.returncode}",
               "seconds": time.perf_counter() - t0}
    res["peak_mb"] = usage.ru_maxrss / 1024  # Linux: KiB
    return res


def table(results: dict[str, dict], size_mb: float) -> str:
    """The figures side by side: one line per version."""
    head = f"{'version':<18} {'file MB':>8} {'rows':>10} {'samples':>10} {'seconds':>9} " \
           f"{'peak MB':>9}  error"
    rows = [head]
    for name, r in results.items():
        rows.append(f"{name:<18} {size_mb:>8.1f} {r['rows']:>10} {r['samples']:>10} "
                    f"{r['seconds']:>9.2f} {r['peak_mb']:>9.0f}  {r['error'] or '-'}")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    """Write the file, import it with each version, print the table (and ``--json``)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=50.0, help="file size, MB (default 50)")
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--baseline-root", help="another tealeaves tree, measured first")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON too")
    ap.add_argument("--how", choices=("frame", "store", "both"), default="both",
                    help="import_file into one frame, `tealeaves import` into a store, or "
                         "both (default)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "dmon.txt"
        write_dmon(path, args.mb, args.gpus)
        size_mb = path.stat().st_size / 1e6
        results = {}
        hows = ("frame", "store") if args.how == "both" else (args.how,)
        for how in hows:
            if args.baseline_root:
                results[f"before/{how}"] = measure(path, args.baseline_root, how)
            results[f"this tree/{how}"] = measure(path, how=how)
    print(table(results, size_mb))
    if args.json:
        print(json.dumps({"file_mb": size_mb, "results": results}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
