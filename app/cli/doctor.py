"""``tealeaves doctor``: probe the GPUs' capabilities and reachable rates."""

from __future__ import annotations

import argparse

from tealeaves.app.cli.args import upto
from tealeaves.app.cli.common import EXIT_NO_GPU
from tealeaves.data.jsontext import dumps as json_dumps


def cmd_doctor(args: argparse.Namespace) -> int:
    """``tealeaves doctor``: print the probe as a table or JSON.  Returns the exit status: 0, or
    ``EXIT_NO_GPU`` (3, as ``collect``) when NVML finds no GPU; the output says so then too
    (one line, or ``{"gpus": [], "error": ...}`` with ``--json``), so a script can test for a
    GPU with the exit status alone."""
    from tealeaves.collectors.nvml_shim import NvmlUnavailable
    from tealeaves.collectors.probe import format_table, probe

    try:
        report = probe(poll_s=args.poll)
    except NvmlUnavailable as exc:
        if args.json:
            print(json_dumps({"gpus": [], "error": str(exc)}))
        else:
            print(f"no NVIDIA GPU found: {exc} (without one, `tealeaves dashboard` replays a "
                  f"bundled real trace and `tealeaves import FILE` reads another machine's "
                  f"nvidia-smi/DCGM captures)")
        return EXIT_NO_GPU
    print(json_dumps(report) if args.json else format_table(report))
    return 0


def add_parser(sub) -> None:
    """Add ``doctor`` to the top-level subparsers ``sub``."""
    dr = sub.add_parser("doctor", help="probe the GPUs: capabilities and reachable rates",
                        description="List every GPU's capabilities (GPM, PCIe counters, MIG, "
                                    "NVLink, processes) and the rate each metric group can "
                                    "reach on this machine. Exit status 0, or 3 when no GPU "
                                    "(NVML) is found.")
    dr.add_argument("--json", action="store_true", help="print one JSON object")
    dr.add_argument("--poll", type=upto(60, "the poll (s)"), default=0.5,
                    help="seconds of tight polling to measure refresh rates, and of GPM "
                         "reads, one per 100 ms on every GPU (default 0.5: 5 reads; a GPM "
                         "metric that failed some of them is listed as intermittent, with "
                         "the counts)")
    dr.set_defaults(func=cmd_doctor)
