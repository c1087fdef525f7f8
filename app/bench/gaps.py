"""``tealeaves bench gaps``: does a pause between sessions cost anything?

Two stores hold the same samples: ``copies`` back-to-back copies of the bundled real trace,
either end to end (no gap) or with ``gap_days`` days between the first copy and the rest (a
store that kept yesterday's session and last month's).  For each store, in a fresh process
each (so peak memory is that step's), the benchmark times:

- **dashboard start**: ``create_app`` on the store, the history read, binned and labelled, and
  the first page's layout;
- **"all" view**: the server side of the "all" preset (one ``_dash-update-component``
  request, as the page sends it);
- **report**: ``report.from_store`` + ``build_report`` of everything the store holds.

Cost must follow the samples, not last - first: the gap column should match the no-gap one
(the issue asks within 2x).  Figures: seconds and peak RSS (MB) per step.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DAY_S = 86_400.0
STEPS = ("dashboard start", '"all" view', "report")


def build(path: Path, gap_s: float, copies: int = 2) -> int:
    """Write ``copies`` copies of the bundled trace into a new store at ``path``, the second
    and later ``gap_s`` seconds after the first ends.  Returns the rows written."""
    import pandas as pd

    from tealeaves.data import bundled_trace_path
    from tealeaves.data.store import SampleStore
    from tealeaves.data.traces import read_trace

    tr = read_trace(bundled_trace_path())
    s = tr.samples
    period = float(s["timestamp"].max() - s["timestamp"].min()) + 1.0
    parts = []
    for i in range(copies):
        shift = i * period + (gap_s if i else 0.0)
        parts.append(s.assign(timestamp=s["timestamp"] + shift,
                              monotonic=s["monotonic"] + shift))
    frame = pd.concat(parts, ignore_index=True)
    path.unlink(missing_ok=True)
    with SampleStore(path) as store:
        store.put_devices(tr.devices)
        store.append(frame)
    return len(frame)


def measure(path: Path) -> dict:
    """Time the three steps on the store at ``path`` in this process (see the module doc)."""
    from tealeaves.app.bench.dashboard import _post, _update_body
    from tealeaves.app.dashboard.factory import DashboardConfig, create_app
    from tealeaves.app.report.model import build_report, from_store
    from tealeaves.data.store import SampleStore

    out: dict = {}
    t = time.perf_counter()
    store = SampleStore(path, readonly=True)
    app = create_app(store, DashboardConfig(source="bench gaps", server_lag_s=0.0))
    live = app.tealeaves_live
    client = app.server.test_client()
    client.get("/")
    out["dashboard start"] = time.perf_counter() - t
    state = {**live.snapshot().state, "bin_ms": 100.0}
    dt, size, _ = _post(client, _update_body(app, {"kind": "all", "px": 1500, "n": 1}, state))
    out['"all" view'] = dt
    out["all_kb"] = size / 1024
    store.close()
    t = time.perf_counter()
    build_report(from_store(path, progress=False), progress=False)
    out["report"] = time.perf_counter() - t
    out["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def run(gap_days: float = 30.0, copies: int = 2, log=print) -> dict:
    """Build both stores in a temporary folder and measure each in a fresh process.

    Returns:
        ``{"rows": n, "gap_days": d, "no gap": figures, "gap": figures, "ratio": gap/no gap}``
        (figures as :func:`measure`).
    """
    res: dict = {"gap_days": gap_days}
    with tempfile.TemporaryDirectory(prefix="tealeaves-gaps-") as tmp:
        for name, gap_s in (("no gap", 0.0), ("gap", gap_days * DAY_S)):
            db = Path(tmp) / f"{name.replace(' ', '_')}.db"
            res["rows"] = build(db, gap_s, copies)
            p = subprocess.run([sys.executable, "-m", "tealeaves.app.bench.gaps", "--measure",
                                str(db)], capture_output=True, text=True, check=False)
            if p.returncode != 0:
                raise RuntimeError(f"measuring {name} failed: {p.stderr[-2000:]}")
            res[name] = json.loads(p.stdout.strip().splitlines()[-1])
    res["ratio"] = {k: res["gap"][k] / res["no gap"][k] for k in (*STEPS, "rss_mb")}
    log(table(res))
    return res


def table(res: dict) -> str:
    """The figures as a Markdown table."""
    lines = [(f"{res['rows']:,} samples; the gap store has {res['gap_days']:g} days between "
              f"its sessions"), "",
             "| step | no gap | gap | gap / no gap |", "|---|---:|---:|---:|"]
    for k in STEPS:
        lines.append(f"| {k} (s) | {res['no gap'][k]:.2f} | {res['gap'][k]:.2f} | "
                     f"{res['ratio'][k]:.2f} |")
    lines.append(f"| peak RSS (MB) | {res['no gap']['rss_mb']:.0f} | {res['gap']['rss_mb']:.0f} "
                 f"| {res['ratio']['rss_mb']:.2f} |")
    return "\n".join(lines)


if __name__ == "__main__":  # the measuring child: python -m tealeaves.app.bench.gaps --measure DB
    if len(sys.argv) == 3 and sys.argv[1] == "--measure":
        from tealeaves.data.jsontext import dumps
        print(dumps(measure(Path(sys.argv[2]))))
    else:
        sys.exit("usage: python -m tealeaves.app.bench.gaps --measure STORE")
