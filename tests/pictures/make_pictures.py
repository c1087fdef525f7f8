"""Make the screenshot test set (issue 23): real terminal screenshots of GPU monitors whose
printed values and telemetry are known.

Input: captures made on an H200 by ``kernels_bench/record_monitors.sh`` (``captures.jsonl``
and ``dmon.jsonl`` of each run: the tools' terminal bytes, colours kept, with their times,
and ``nvidia-smi dmon``'s stream).  Each picture is a capture replayed in a real ``xterm``
under ``Xvfb`` and taken with ``scrot`` (Debian's packages), cropped to the text, at one of
several fonts, sizes and colour schemes.  Pictures of 2, 4 and 8 GPUs are made from the
one-GPU captures by printing each GPU's rows from a capture of another moment (no machine of
several GPUs was lent): the tool's own lines, only the GPU index changed.

Output, beside this file: ``NN_<tool>_<n>gpu.png`` and ``truth.json``: per picture, the tool,
the font, each GPU's printed values (``data.screen.tools.parse_text`` of the text replayed)
and its telemetry at that moment (utilization from the ``nvidia-smi dmon`` stream recorded
beside it, mean over the capture's second, %).

The captures of the two runs used are in ``captures/run1`` and ``captures/run3`` (gzip'd, with
the workload's labels; run 3 also with the collector's trace).  Run (needs Xvfb, xterm,
scrot; ``DISPLAY`` an Xvfb screen of 1800x1100): ``python tests/pictures/make_pictures.py
tests/pictures/captures/run1 tests/pictures/captures/run3``.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path

from PIL import Image

from tealeaves.data.screen.tools import parse_text, strip_ansi

HERE = Path(__file__).resolve().parent
#: (font, size, background, foreground) of the pictures, in turn.
LOOKS = (("DejaVu Sans Mono", 11, "black", "white"), ("Liberation Mono", 12, "white", "black"),
         ("Noto Sans Mono", 10, "black", "grey90"), ("DejaVu Sans Mono", 14, "#300a24", "white"),
         ("Liberation Mono", 9, "black", "white"))
_QUERIES = re.compile(rb"\x1bP[^\x1b]*\x1b\\|\x1b\[6n|\x1b\[>q|\x1b\[\?[0-9;]*[hl]")


DMON_HEADER: list[str] = []


def _text(path: Path) -> str:
    """A capture file, plain or gzip'd (``captures/`` keeps them gzip'd)."""
    gz = path.with_name(path.name + ".gz")
    return gzip.decompress(gz.read_bytes()).decode() if gz.exists() else path.read_text()


def load(run: Path) -> tuple[list[dict], list[dict]]:
    caps = [json.loads(x) for x in _text(run / "captures.jsonl").splitlines()]
    dmon = [json.loads(x) for x in _text(run / "dmon.jsonl").splitlines()]
    if not DMON_HEADER:
        DMON_HEADER.extend(d["line"] for d in dmon if d["line"].startswith("#"))
    for c in caps:
        c["bytes"] = _QUERIES.sub(b"", c["text"].encode("latin-1"))
        c["utf8"] = c["bytes"].decode("utf-8", "replace")
    rows = []
    for d in dmon:
        toks = d["line"].split()
        if d["line"].startswith("#") or len(toks) < 6:
            continue
        rows.append({"t": d["t"], "sm": float(toks[5]) if toks[5] != "-" else None,
                     "line": d["line"]})
    return [c for c in caps if c["rc"] == 0 and parse_text(c["utf8"])[1]], rows


def telemetry(rows: list[dict], t0: float, t1: float) -> float | None:
    """Mean NVML utilization (dmon ``sm``) of the lines stamped within a second of the
    capture."""
    v = [r["sm"] for r in rows if t0 - 1.0 <= r["t"] <= t1 + 1.0 and r["sm"] is not None]
    return sum(v) / len(v) if v else None


def _smi_blocks(text: str, tool: str) -> tuple[list[str], list[str], list[str]]:
    """A one-GPU nvidia-smi / nvitop screen cut into head, the GPU's rows, tail."""
    lines = text.split("\n")
    sep = "|=" if tool == "nvidia-smi" else "╞"
    i = next(k for k, ln in enumerate(lines) if ln.lstrip().startswith(sep)) + 1
    end = "+-" if tool == "nvidia-smi" else "╘"
    j = next(k for k in range(i, len(lines)) if lines[k].lstrip().startswith(end))
    return lines[:i], lines[i:j], lines[j:]


def compose(tool: str, caps: list) -> str:
    """One screen of ``len(caps)`` GPUs: GPU ``k`` printed as in ``caps[k]``."""
    if tool == "gpustat":
        head = caps[0]["utf8"].split("\r\n")[0]
        rows = []
        for k, c in enumerate(caps):
            line = next(x for x in c["utf8"].split("\r\n") if "[0]" in x)
            rows.append(line.replace("[0]", f"[{k}]", 1))
        return "\r\n".join([head, *rows]) + "\r\n"
    if tool == "nvidia-smi dmon":  # caps: dmon lines; the header printed once above them
        return "\n".join(DMON_HEADER[:2] + [
            re.sub(r"^(\s*\S+\s+)0(\s)", rf"\g<1>{k}\2", r, count=1)
            for k, r in enumerate(caps)]) + "\n"
    base = caps[0]["utf8"].replace("\r\n", "\n")
    head, _, tail = _smi_blocks(base, tool)
    body: list[str] = []
    for k, c in enumerate(caps):
        _, rows, _ = _smi_blocks(c["utf8"].replace("\r\n", "\n"), tool)
        # the index, past the frame and any colour escape before it
        rows = [re.sub(r"^((?:[|│ ]|\x1b\[[0-9;]*m)*)0(\s)", rf"\g<1>{k}\2", rows[0],
                       count=1), *rows[1:]]
        if tool == "nvidia-smi" and k < len(caps) - 1:
            rows.append("+" + "-" * 41 + "+" + "-" * 24 + "+" + "-" * 22 + "+")
        body += rows
    return "\n".join(head + body + tail).replace("\n", "\r\n")


def shoot(data: bytes, look: tuple, out: Path, cols: int, rows: int) -> None:
    """``data`` replayed in an xterm of ``cols`` x ``rows`` with ``look``, screenshot by scrot
    and cropped to the text."""
    font, size, bg, fg = look
    raw = out.with_suffix(".ans")
    raw.write_bytes(data)
    xt = subprocess.Popen(["xterm", "-geometry", f"{cols}x{rows}+0+0", "-fa", font, "-fs",
                           str(size), "-bg", bg, "-fg", fg, "+sb", "-e", "sh", "-c",
                           f"cat '{raw}'; sleep 4"])
    time.sleep(2.2)
    shot = out.with_suffix(".full.png")
    subprocess.run(["scrot", "-o", str(shot)], check=True)
    xt.wait()
    raw.unlink()
    img = Image.open(shot).convert("RGB")
    shot.unlink()
    ground = sum(img.getpixel((img.width // 2, img.height - 30))) // 3  # the background
    diff = Image.eval(img.convert("L"), lambda v: 255 if abs(v - ground) > 40 else 0)
    box = diff.getbbox() or (0, 0, img.width, img.height)
    crop = img.crop((0, 0, min(img.width, box[2] + 12), min(img.height, box[3] + 12)))
    crop.quantize(64).save(out, optimize=True)


def main(runs: list[str]) -> int:
    caps, dmon = [], []
    for r in runs:
        c, d = load(Path(r))
        caps += c
        dmon += d
    rng = random.Random(23)
    def busy(c: dict) -> bool:
        return (telemetry(dmon, c["t0"], c["t1"]) or 0) >= 50

    truth = []
    n = 0
    patterns = [(1, None), (1, None), (2, "uniform-busy"), (2, "one-hot"), (4, "half"),
                (4, "one-idle"), (8, "uniform-busy"), (8, "uniform-idle"), (8, "half"),
                (8, "one-hot"), (8, "two-hot")]
    for tool in ("nvidia-smi", "nvitop", "gpustat", "nvidia-smi dmon"):
        pool = [c for c in caps if c["tool"] == (tool if tool != "nvidia-smi dmon"
                                                 else "nvidia-smi")]
        for n_gpus, pattern in patterns:
            # one terminal width per picture: rows printed at another width would wrap
            width = rng.choice(sorted({c["cols"] for c in pool}))
            hot = [c for c in pool if busy(c) and c["cols"] == width] or \
                [c for c in pool if busy(c)]
            cold = [c for c in pool if not busy(c) and c["cols"] == width] or \
                [c for c in pool if not busy(c)]
            if pattern is None:
                picks = [rng.choice(hot if n % 2 else cold)]
            else:
                k = {"uniform-busy": n_gpus, "uniform-idle": 0, "half": n_gpus // 2,
                     "one-hot": 1, "two-hot": 2, "one-idle": n_gpus - 1}[pattern]
                picks = [rng.choice(hot) for _ in range(k)] + \
                    [rng.choice(cold) for _ in range(n_gpus - k)]
                rng.shuffle(picks)
            if tool == "nvidia-smi dmon":
                srcs = [min(dmon, key=lambda r, c=c: abs(r["t"] - c["t0"])) for c in picks]
                text = compose(tool, [s["line"] for s in srcs])
                tele = [s["sm"] for s in srcs]
                cols, rows = 120, 14
            else:
                text = compose(tool, picks) if len(picks) > 1 else picks[0]["utf8"]
                tele = [telemetry(dmon, c["t0"], c["t1"]) for c in picks]
                # wide enough for the tool's longest line (nvidia-smi prints 89 columns
                # whatever the terminal): a wrapped table is no picture anyone takes
                widest = max(len(strip_ansi(x)) for x in text.split("\n"))
                cols = max(picks[0]["cols"], widest + 2)
                rows = min(60, len(text.split("\n")) + 2)
            look = LOOKS[n % len(LOOKS)]
            name = f"{n:02d}_{tool.replace(' ', '_')}_{len(picks)}gpu.png"
            shoot(text.encode("utf-8"), look, HERE / name, cols, rows)
            _, gpus = parse_text(text)
            truth.append({"file": name, "tool": tool, "font": f"{look[0]} {look[1]}",
                          "background": look[2], "gpus": [
                              {"gpu": g.gpu, "printed": g.values, "telemetry_util_pct": u}
                              for g, u in zip(gpus, tele, strict=True)]})
            n += 1
            print(name, file=sys.stderr)
    (HERE / "truth.json").write_text(json.dumps(truth, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("DISPLAY", ":77")
    raise SystemExit(main(sys.argv[1:]))
