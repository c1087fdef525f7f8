"""``tealeaves screenshot read``: what a screenshot of a GPU monitor shows, read from the
picture alone (``data.screen.read``), and its verdict (``classifier.picture``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from tealeaves.app.cli.common import fail, shown
from tealeaves.data.jsontext import dumps as json_dumps


def read_one(path: Path, halves: bool = False, cuts: list[float] | None = None) -> dict:
    """One picture read: ``{"file", "tool", "gpus", "regions", "units", "notes", "charts"}``
    (``classifier.picture.summary``; with ``halves``, the top and bottom halves are regions
    too; ``cuts``, fractions of nvtop's time axis to cut its charts at, oldest 0).

    Raises:
        ValueError (``ScreenReadError``): not a picture, or no OCR engine (names the file).
    """
    from tealeaves.app.figures.read_back import read_back
    from tealeaves.classifier.picture import summary
    from tealeaves.data.screen.read import FIELDS, ScreenReadError, read_picture
    from tealeaves.data.screen.screenshots import MAX_BYTES

    try:
        if not path.is_file():  # a folder, a FIFO, a device: nothing to read as a picture
            raise ValueError(f"{path}: not a file" if path.exists() else
                             f"{path}: no such file")
        if path.stat().st_size > MAX_BYTES:
            raise ValueError(f"{path}: {path.stat().st_size / 2**20:.1f} MB is over the "
                             f"{MAX_BYTES >> 20} MB limit of a picture")
        with path.open("rb") as f:
            data = f.read(MAX_BYTES + 1)
        r = read_picture(data, str(path), graphs=read_back)
    except ScreenReadError as exc:
        raise ValueError(str(exc)) from None
    except OSError as exc:
        raise ValueError(f"{path}: {exc.strerror or exc}") from None
    regions = [{"name": "top half", "box": [0.0, 0.0, 1.0, 0.5]},
               {"name": "bottom half", "box": [0.0, 0.5, 1.0, 1.0]}] if halves else []
    return {"file": str(path), **summary(r, regions, cuts), "units": FIELDS}


#: How the values are named in the text output, utilization first (the verdict's load).
LABELS = {"util_pct": "utilization", "power_w": "power", "power_limit_w": "power limit",
          "mem_used_mib": "memory used", "mem_total_mib": "memory total",
          "temp_c": "temperature", "sm_clock_mhz": "GPU clock", "mem_clock_mhz": "memory clock",
          "fan_pct": "fan", "pcie_gen": "PCIe generation", "pcie_width": "PCIe width",
          "pcie_rx_bytes_per_s": "PCIe RX", "pcie_tx_bytes_per_s": "PCIe TX",
          "enc_pct": "encoder", "dec_pct": "decoder"}


def cmd_screenshot(args: argparse.Namespace) -> int:
    """``tealeaves screenshot read FILE... [--json]``.  Returns the exit status (0; 2 when a
    file cannot be read as a picture: said in one line, the others are still read)."""
    import sys

    from tqdm import tqdm

    out, bad = [], 0
    # Tesseract takes 1-7 s a picture on a busy two-core machine (docs/screen-reading.md):
    # a bar on stderr says which picture is being read (shown on a terminal only, so the
    # printed reading or JSON on stdout stays clean)
    bar = tqdm(args.files, desc="reading", unit="picture", file=sys.stderr, leave=False,
               disable=None)
    for p in bar:  # one unreadable file is said and skipped, the others are read
        bar.set_postfix_str(f"{p.name}: OCR (Tesseract) and the bands", refresh=True)
        try:
            out.append(read_one(p, args.halves, args.cuts))
        except ValueError as exc:
            bar.clear()
            fail(str(exc))
            out.append({"file": str(p), "error": str(exc)})
            bad += 1
    bar.close()
    if args.json:
        print(json_dumps(out, indent=1))  # an unknown mean load is null, never NaN
        return 2 if bad else 0
    for r in out:
        if "error" in r:
            continue
        if r.get("captures"):
            print(f"{shown(r['file'])}: {r['tool']}, {len(r['captures'])} captures in one picture")
            for note in r["notes"]:
                print(f"  {note}")
            for c in r["captures"]:
                _print_one({**c, "file": f"  {c['name']}", "units": r["units"]}, "    ")
            continue
        _print_one(r, "  ")
    return 2 if bad else 0


def _print_one(r: dict, ind: str) -> None:
    """One reading's lines (a picture, or one capture of it), indented by ``ind``."""
    print(f"{shown(r['file'])}: {r['tool'] or 'no GPU monitor recognised'}, "
          f"{len(r['gpus'])} GPU{'s' if len(r['gpus']) != 1 else ''} read")
    for g in r["gpus"]:
        blank = g.get("blank") or ()
        cells = ", ".join(f"{LABELS[k]} {g['values'][k]:g} {r['units'][k]} "
                          f"({g['confidence'][k]:.0%} sure)" if k in g["values"]
                          else f"{LABELS[k]} n/a (printed blank)"
                          for k in LABELS if k in g["values"] or k in blank)
        print(f"{ind}GPU {g['gpu']}: {cells}")
    for note in r["notes"]:
        print(f"{ind}{note}")
    for reg in r["regions"]:
        if reg["verdict"]:
            gpus = f"GPUs {', '.join(map(str, reg['gpus']))}" if reg["gpus"] else \
                "no GPU read"
            print(f"{ind}verdict, {reg['name']} ({gpus}): {reg['verdict']['text']}")
    if r["regions"][0]["verdict"]:
        print(f"{ind}what it cannot tell: {r['regions'][0]['verdict']['limits']}")
    if r.get("charts"):
        for st in r["charts"]["stretches"]:
            print(f"{ind}stretch, {st['text']}")
        for note in r["charts"]["notes"]:
            print(f"{ind}charts: {note}")
        if r["charts"]["stretches"]:
            print(f"{ind}what the charts cannot tell: {r['charts']['limits']}")


def add_parser(sub) -> None:
    """Add ``screenshot`` (``screenshot read``) to the top-level subparsers ``sub``."""
    s = sub.add_parser("screenshot", help="read screenshots of GPU monitors",
                       description="Read screenshots of nvidia-smi, nvidia-smi dmon, nvitop "
                                   "or gpustat: each GPU's printed values and a verdict, "
                                   "from the picture alone (Tesseract OCR).")
    ssub = s.add_subparsers(dest="action", required=True, metavar="ACTION")
    r = ssub.add_parser("read", help="print what each picture shows")
    r.add_argument("files", type=Path, nargs="+", help="PNG or JPEG screenshots")
    r.add_argument("--json", action="store_true", help="print one JSON list")
    r.add_argument("--halves", action="store_true",
                   help="also a verdict for the top and the bottom half of each picture")
    r.add_argument("--cuts", type=_fractions, default=None, metavar="F[,F...]",
                   help="cut nvtop's charts at these fractions of their time axis (0 the "
                        "oldest moment shown, 1 the newest; 0.5: the older and newer half) "
                        "instead of where the pattern changes")
    r.set_defaults(func=cmd_screenshot)


def _fractions(text: str) -> list[float]:
    """``--cuts``' value: comma-separated fractions strictly between 0 and 1."""
    try:
        out = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--cuts {text!r}: not numbers") from None
    if not out or any(not 0 < f < 1 for f in out):
        raise argparse.ArgumentTypeError(f"--cuts {text!r}: each cut is a fraction between 0 "
                                         f"and 1 of the time axis")
    return out
