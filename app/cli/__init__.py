"""The ``tealeaves`` command line.

Subcommands import their heavy dependencies lazily, so ``tealeaves collect`` and
``tealeaves bench workload`` run on a GPU host without the dashboard's packages (dash, plotly).
Every failure the user can fix prints one line naming the problem and exits non-zero.

One module per command (or family), each holding its parser (``add_parser(sub)``) next to its
handler: ``dashboard``, ``collect``, ``imports`` (``import``), ``doctor``, ``classify``,
``calibrate``, ``evaluate`` (``evaluate`` and ``train``), ``report``, ``bench`` (``bench ...``); argument
types in ``args``, exit codes and the one-line error in ``common``.
"""

from __future__ import annotations

import argparse
import os
import sys

from tealeaves.app.cli import (
    bench,
    calibrate,
    classify,
    collect,
    dashboard,
    doctor,
    evaluate,
    imports,
    report,
    screenshot,
)
from tealeaves.app.cli.args import use_model_folder, zone_error
from tealeaves.app.cli.common import fail, package_version

#: The commands in the order ``tealeaves --help`` lists them.
COMMANDS = (dashboard, collect, imports, doctor, classify, calibrate, evaluate, report,
            screenshot, bench)


def build_parser() -> argparse.ArgumentParser:
    """The ``tealeaves`` parser: every command's sub-parser, each with ``func`` (its handler,
    ``Namespace -> exit status``) in its defaults."""
    p = argparse.ArgumentParser(
        prog="tealeaves",
        description="Read the vital signs of a multi-GPU LLM inference server: per-GPU "
                    "counters, prefill/decode phases and MoE imbalance.")
    p.add_argument("--version", action="version", version=f"tealeaves {package_version()}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``tealeaves`` console script.

    Returns the exit status: 0 success, 2 bad input (one line on stderr), 3 no GPU, 4 samples
    collected but not stored (``collect``), 130 interrupted.  Output piped into a program that stops reading (``| head``) ends quietly.
    """
    args = build_parser().parse_args(argv)
    bad_zone = zone_error(getattr(args, "tz", None))
    if bad_zone:  # every command's --tz, used by its files or not
        return fail(f"--tz: {bad_zone}")
    if getattr(args, "model", None) is not None:  # every command's --model: checked first
        bad_model = use_model_folder(args.model)
        if bad_model:
            return fail(bad_model)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # Python would complain again when flushing stdout at exit: point it at /dev/null.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except RuntimeError as exc:
        from tealeaves.data.store import StoreError

        if isinstance(exc, StoreError):  # a damaged or foreign store met mid-command
            return fail(str(exc))
        raise
