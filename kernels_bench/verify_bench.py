"""``tealeaves bench verify-attention``: the verify-attention kernels swept on a GPU.

For every point (batch, context, tree size, heads, page size) it builds fresh random inputs on
the GPU, checks each kernel against the reference (``verify_ref.verify_reference`` in float32
on the GPU from the same bf16 inputs), and times the unsplit baseline and the split-KV kernel
at every NSPLIT: CUDA-graph replays of the launches (split + combine), the median of many,
rotating among enough copies of the inputs that they do not fit in L2.  Achieved bandwidth is
the cache bytes the problem must read (``verify_ref.kv_bytes``) over the time, next to the
device-to-device copy bandwidth measured in the same run (bytes read + written) and the
arithmetic floor (two matrix products per cache row and query row at the bf16 matrix rate,
measured too).  Writes ``verify_attention.csv``, ``verify_attention.png`` and
``verify_attention.json`` (machine, driver, date, ceilings) to ``--out``
(``verify_attention_validate.*`` with ``--validate``).

Split kernels: ``gluon`` (``verify_gluon``, Hopper) and ``triton`` (``verify_triton``,
portable); ``--kernels`` picks them, the first swept over every NSPLIT, the others near their
chooser's pick.  ``--sustain S`` instead runs one decode-sized verify (``SUSTAIN_POINT``, the
chooser's split) back to back for S seconds between idle stretches: the workload
``tealeaves collect`` records for the classifier.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

import torch

from tealeaves.kernels_bench.verify_args import add_arguments, combination_error
from tealeaves.kernels_bench.verify_ref import (
    D_K,
    D_V,
    HOPPER_KERNELS,
    WIDE_KERNEL,
    WIDE_KERNELS,
    choose_plan,
    kv_bytes,
    make_inputs,
    relative_error,
    verify_reference,
)

#: NSPLIT values swept.
NSPLITS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
#: Relative error a bf16 kernel must stay under against the float32 reference.
BF16_TOL = 2e-2
#: Inputs are copied until one timed pass reads at least this many bytes (several times L2).
ROTATE_BYTES = 512 * 2**20
#: Largest partial-output buffer (bytes) a split count may need; larger ones are skipped.
MAX_PARTIAL_BYTES = 3 * 2**30
#: Largest verify (matrix-product FLOP, ``_flops``) checked against the float32 reference:
#: the reference runs without tensor cores (about 50 TFLOP/s), so the biggest large-tree
#: shapes (up to 7 TFLOP) are timed only; their rows say so (``rel_err`` empty).
REF_FLOPS_MAX = 3e11
#: Line style of each split kernel in the plots.
LINE_STYLES = {"gluon": "-", "triton": "--", "gluon64": "-", "seesaw": ":"}
#: Seconds of back-to-back products before the sustained matrix-product rate is timed.
SUSTAINED_S = 0.5


@dataclass(frozen=True)
class Point:
    """One problem shape of the sweep."""

    batch: int
    context: int
    tree: int
    heads: int
    page_size: int
    scattered: bool = True


def _median_seconds(fn, reps: int) -> float:
    """Median over ``reps`` event-timed calls of ``fn``, seconds."""
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) / 1e3)
    return statistics.median(times)


def copy_bandwidth(nbytes: int = 4 * 2**30, reps: int = 20) -> float:
    """Device-to-device copy bandwidth, bytes/s, counting bytes read plus bytes written
    (METHOD.md): the median of ``reps`` copies of ``nbytes``."""
    src = torch.empty(nbytes // 2, dtype=torch.bfloat16, device="cuda").normal_()
    bufs = [src, torch.empty_like(src)]
    del src

    def copy():
        bufs[1].copy_(bufs[0])

    for _ in range(3):
        copy()
    t = _median_seconds(copy, reps)
    bufs.clear()  # 8 GB back before the sweep allocates
    torch.cuda.empty_cache()
    return 2 * nbytes / t


def matmul_rate(n: int = 8192, reps: int = 10, warm_s: float = 0.0) -> float:
    """bf16 matrix-product rate, FLOP/s, on random data: the median of ``reps`` products.

    ``warm_s`` 0: after three warm-up products, the burst rate the roofline's ceiling uses
    (738-794 TFLOP/s from run to run on one H200).  ``warm_s`` > 0: after that many seconds
    of products back to back, the rate the chip sustains once its clocks settle under load
    (630-690 TFLOP/s on the same H200; docs/verify-attention.md, "Which matmul ceiling")."""
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    t0 = time.perf_counter()
    done = 0
    while done < 3 or time.perf_counter() - t0 < warm_s:
        a @ b
        done += 1
        if done % 8 == 0:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    return 2 * n**3 / _median_seconds(lambda: a @ b, reps)


def ceilings(repeats: int = 2, idle_s: float = 2.0) -> dict:
    """The roofline's ceilings, each measured ``repeats`` times after ``idle_s`` seconds idle:
    ``{"burst": [TFLOP/s, ...], "sustained": [TFLOP/s, ...], "copy": [GB/s, ...]}``
    (``matmul_rate()``, ``matmul_rate(warm_s=SUSTAINED_S)``, ``copy_bandwidth()``), each
    repeat printed as it comes.  Needs a CUDA GPU."""
    got = {"burst": [], "sustained": [], "copy": []}
    for _ in range(repeats):
        torch.cuda.synchronize()
        time.sleep(idle_s)
        got["burst"].append(matmul_rate() / 1e12)
        got["sustained"].append(matmul_rate(warm_s=SUSTAINED_S) / 1e12)
        got["copy"].append(copy_bandwidth() / 1e9)
        print({k: round(v[-1]) for k, v in got.items()}, flush=True)
    return got


def time_calls(fns: list, reps: int = 30) -> float:
    """Seconds per call of the functions in ``fns`` (each one call), from CUDA-graph replays
    of all of them in turn; the median over ``reps`` replays.  A call of over 20 ms is timed
    plainly with events, three times."""
    for f in fns:
        f()
    torch.cuda.synchronize()
    if _median_seconds(fns[0], 1) > 0.02:
        return _median_seconds(fns[0], 3)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    g = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream):
        for f in fns:  # warm-up on the capture stream
            f()
        stream.synchronize()
        with torch.cuda.graph(g, stream=stream):
            for f in fns:
                f()
    torch.cuda.current_stream().wait_stream(stream)
    for _ in range(3):
        g.replay()
    return _median_seconds(g.replay, reps) / len(fns)


def _flops(inp) -> float:
    """Matrix-product operations of one verify pass: per query row and cache row, 576 MACs
    for q k and 512 for p v (the masked tree part counted whole)."""
    _B, T, H = inp.shape
    rows = (inp.ctx_lens.double() + T).sum().item()
    return 2.0 * T * H * rows * (D_K + D_V)


def rotating_inputs(pt: Point, seed: int = 0) -> list:
    """Copies of one point's inputs (``make_inputs`` on the GPU, seeds ``seed``, ``seed + 1``,
    ...), enough that timing a call on each in turn reads at least ``ROTATE_BYTES`` of cache
    (so no call finds its cache in L2), at most 32.  The first is the one checked."""
    first = make_inputs(pt.batch, pt.context, pt.tree, pt.heads, pt.page_size,
                        scattered=pt.scattered, device="cuda", seed=seed)
    more = max(0, min(31, math.ceil(ROTATE_BYTES / kv_bytes(first)) - 1))
    return [first] + [make_inputs(pt.batch, pt.context, pt.tree, pt.heads, pt.page_size,
                                  scattered=pt.scattered, device="cuda", seed=seed + 1 + i)
                      for i in range(more)]


def run_point(pt: Point, bw: float, mm: float, sms: int, kernels=("gluon", "triton"),
              nsplits=NSPLITS, baseline: bool = True, check=(1, "chosen", 256), seed: int = 0,
              window: int | None = None, log=print) -> list[dict]:
    """Check and time every kernel at one point; one row per (kernel, nsplit).

    The first kernel of ``kernels`` is timed at every NSPLIT of ``nsplits`` (``window``: only
    those within that factor of its chooser's pick), the others at the powers of two from a
    quarter to four times their chooser's pick (with ``window``: at their pick alone).
    ``check``: the NSPLITs checked against the reference (``"chosen"``: the pick, ``"all"``:
    every one timed), where the point is small enough (``REF_FLOPS_MAX``).  Every row carries the chooser's own
    plan for the shape (``plan_kernel``, ``plan_nsplit``: ``verify_ref.choose_plan``)."""
    from tealeaves.kernels_bench.verify_triton import SplitPlan, verify_unsplit

    copies = rotating_inputs(pt, seed)
    first = copies[0]
    nbytes = kv_bytes(first)
    flops = _flops(first)
    checked = flops <= REF_FLOPS_MAX
    ref = verify_reference(first, dtype=torch.float32) if checked else None
    floor_mem = nbytes / bw
    floor_mm = flops / mm
    rows_m = pt.tree * pt.heads
    out = []
    plan_kernel, plan_ns = choose_plan(pt.batch, pt.heads, pt.tree, pt.context, sms,
                                       hopper=any(k in HOPPER_KERNELS for k in kernels))
    base = {**asdict(pt), "kv_bytes": nbytes, "floor_mem_us": floor_mem * 1e6,
            "floor_matmul_us": floor_mm * 1e6, "copy_gbps": bw / 1e9,
            "plan_kernel": plan_kernel, "plan_nsplit": plan_ns}

    def row(kernel, nsplit, chosen, t, err, cfg):
        return {**base, "chosen_nsplit": chosen, "kernel": kernel, "nsplit": nsplit, **cfg,
                "time_us": t * 1e6, "gbps": nbytes / t / 1e9, "copy_share": nbytes / t / bw,
                "roofline_share": max(floor_mem, floor_mm) / t, "rel_err": err}

    if baseline and pt.page_size == 1:  # the case the baseline stands for
        cfg = {"block_m": 16, "block_n": 32, "num_warps": 4, "num_stages": 2}
        o = verify_unsplit(first, **cfg)
        err = relative_error(o, ref) if checked else float("nan")
        t = time_calls([lambda i=i: verify_unsplit(i, **cfg) for i in copies])
        out.append(row("unsplit", 1, 1, t, err, cfg))
        log(f"  unsplit                   {t * 1e6:10.1f} us {nbytes / t / 1e9:8.1f} GB/s "
            f"err {err:.1e}")
    most = max(1, (pt.context + pt.tree) // 64)
    for ki, kernel in enumerate(kernels):
        chosen = choose_plan(pt.batch, pt.heads, pt.tree, pt.context, sms, kernel=kernel)[1]
        for ns in nsplits:
            partial = pt.batch * ns * rows_m * D_V * 4
            if partial > MAX_PARTIAL_BYTES or ns > most:
                continue
            span = window if ki == 0 else (1 if window else 4)
            if span is not None and not chosen / span <= ns <= chosen * span:
                continue
            plans = [SplitPlan(i, ns, kernel=kernel) for i in copies]
            err = float("nan")
            if checked and (ns in check or "all" in check
                            or (ns == chosen and "chosen" in check)):
                plans[0].out.fill_(float("nan"))  # every element must be written
                err = relative_error(plans[0](), ref)
            t = time_calls([p.__call__ for p in plans])
            out.append(row(f"split_{kernel}", ns, chosen, t, err, plans[0].settings))
            log(f"  split_{kernel:7s} nsplit={ns:<4d}{'*' if ns == chosen else ' '} "
                f"{t * 1e6:10.1f} us {nbytes / t / 1e9:8.1f} GB/s {nbytes / t / bw:6.1%} of copy"
                f" {max(floor_mem, floor_mm) / t:6.1%} of roofline"
                + (f" err {err:.1e}" if not math.isnan(err) else ""))
            del plans
    del copies, first, ref
    torch.cuda.empty_cache()
    return out


#: Shapes the sweep did not hold, for checking the NSPLIT chooser (``--validate``): the first
#: eight were run on 2026-11-30 and 2026-12-01 before the chooser's wave model was written
#: (two of them were its misses), the last eight after it, as a held-out check.
VALIDATION_POINTS = (Point(2, 32768, 8, 8, 1), Point(4, 131072, 32, 8, 1),
                     Point(2, 100000, 4, 16, 16), Point(1, 131072, 8, 8, 64),
                     Point(3, 65536, 16, 8, 1), Point(1, 262144, 2, 8, 1),
                     Point(6, 81920, 4, 8, 32), Point(1, 16384, 128, 8, 1),
                     Point(5, 100000, 4, 8, 1), Point(3, 150000, 8, 8, 16),
                     Point(2, 65536, 16, 8, 64), Point(7, 70000, 2, 16, 1),
                     Point(12, 32768, 4, 8, 1), Point(4, 50000, 16, 16, 1),
                     Point(1, 98304, 1, 8, 1), Point(10, 20000, 3, 8, 4))


#: Large-tree shapes the tree sweep did not hold (``--trees --validate``): other batches,
#: tree sizes, contexts, head counts and page sizes, for checking the kernel choice and NSPLIT.
TREE_VALIDATION_POINTS = (Point(2, 32768, 24, 8, 1), Point(3, 100000, 48, 8, 4),
                          Point(1, 150000, 100, 8, 1), Point(2, 65536, 200, 16, 32),
                          Point(1, 100000, 12, 16, 1), Point(3, 20000, 40, 16, 64),
                          Point(1, 300000, 32, 8, 1), Point(2, 131072, 16, 8, 16),
                          Point(1, 50000, 160, 8, 8), Point(4, 90000, 20, 8, 1))


def tree_points(validate: bool = False) -> list[Point]:
    """The large-tree sweep (``--trees``): batch 1/4 x trees of 16/32/64/128/256 nodes x
    contexts 16k/64k/200k x heads 8/16 x pages of 1/64 (scattered), plus pages of 16 at batch 1
    and 8 heads; the points the done-when reads (batch 1, 8 heads, page 1, 64k and 200k,
    trees of 16-64) first.  ``validate``: ``TREE_VALIDATION_POINTS``."""
    if validate:
        return list(TREE_VALIDATION_POINTS)
    first = [Point(1, c, t, 8, 1) for c in (65536, 200000) for t in (16, 32, 64)]
    rest = [Point(b, c, t, h, p) for b, c, h, p, t in itertools.product(
        (1, 4), (65536, 200000, 16384), (8, 16), (1, 64), (16, 32, 64, 128, 256))]
    rest += [Point(1, c, t, 8, 16) for c in (65536, 200000, 16384) for t in (16, 32, 64, 128, 256)]
    return first + [p for p in rest if p not in first]


def sweep_points(quick: bool = False, validate: bool = False) -> list[Point]:
    """The sweep: contexts 4k/64k/200k, heads 8/16, trees of 4/16/64 nodes, batch 1/8, pages
    of 1/64 (scattered), pages of 16 at 64k+ for 4-node trees and 8 heads, plus contiguous
    pages at 64k; ``quick``: a handful;
    ``validate``: ``VALIDATION_POINTS``."""
    if validate:
        return list(VALIDATION_POINTS)
    if quick:
        return [Point(1, 65536, 4, 8, 1), Point(1, 65536, 16, 8, 1), Point(4, 65536, 4, 8, 64),
                Point(1, 200000, 16, 16, 16), Point(8, 4096, 64, 8, 1)]
    # the points the done-when reads first (a cut run keeps them)
    pts = [Point(b, c, t, h, p) for c, h, t, b, p in itertools.product(
        (65536, 200000, 4096), (8, 16), (4, 16, 64), (1, 8), (1, 64))]
    pts += [Point(b, c, 4, 8, 16) for c in (65536, 200000) for b in (1, 8)]
    pts += [Point(1, 65536, t, 8, p, scattered=False) for t in (4, 16) for p in (1, 64)]
    return pts


def _tokens(n: int) -> str:
    """``65536`` -> ``"64k"``, ``200000`` -> ``"200k"`` (a context length for a title)."""
    return f"{n // 1024}k" if n % 1024 == 0 else f"{n / 1000:.0f}k"


def _nsplit_axis(ax, title: str) -> None:
    """A sweep panel's axes: NSPLIT on a log-2 scale, the title, the 70 % mark dotted."""
    ax.set_xscale("log", base=2)
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("NSPLIT")
    ax.axhline(0.7, color="#999", lw=0.8, ls=":")
    ax.grid(alpha=0.3)


def plot(rows: list[dict], path: Path) -> None:
    """Achieved share of copy bandwidth against NSPLIT at 64k+ context, 8 heads, page 1
    (scattered): one panel per batch (1, 8) and context, one line per split kernel swept and
    tree size (``LINE_STYLES``), the unsplit baseline as crosses at NSPLIT 1, the 70 % mark
    dotted."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(11, 8), sharey=True)
    colours = {4: "#1f77b4", 16: "#ff7f0e", 64: "#2ca02c"}
    for (bi, batch), (ci, ctx) in itertools.product(enumerate((1, 8)),
                                                    enumerate((65536, 200000))):
        ax = axes[bi][ci]
        sel = [r for r in rows if r["context"] == ctx and r["heads"] == 8
               and r["batch"] == batch and r["page_size"] == 1 and r["scattered"]]
        for tree, (kernel, style) in itertools.product((4, 16, 64), LINE_STYLES.items()):
            pts = sorted((r["nsplit"], r["copy_share"]) for r in sel
                         if r["kernel"] == f"split_{kernel}" and r["tree"] == tree)
            if pts:
                ax.plot(*zip(*pts), style, marker="o", ms=3, color=colours[tree],
                        label=f"{kernel}, T={tree}")
            base = [r for r in sel if r["kernel"] == "unsplit" and r["tree"] == tree]
            if base and kernel == "gluon":  # once per tree
                ax.plot([1], [base[0]["copy_share"]], "x", color=colours[tree], ms=8)
        _nsplit_axis(ax, f"batch {batch}, {_tokens(ctx)} context, 8 heads, page 1 (x: unsplit)")
    for ax in axes[:, 0]:
        ax.set_ylabel("cache bytes / time, share of copy bandwidth")
    axes[0][1].legend(fontsize=7, loc="upper right", ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def plot_trees(rows: list[dict], path: Path) -> None:
    """Share of the roofline against NSPLIT at batch 1, 8 heads, page 1 (scattered), 64k and
    200k context: one line per tree size for each wide kernel swept, the one-warpgroup
    ``gluon`` kernel as crosses at its chooser's pick, the chooser's plan circled, the 70 %
    mark dotted."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), sharey=True)
    colours = {16: "#1f77b4", 32: "#ff7f0e", 64: "#2ca02c", 128: "#d62728", 256: "#9467bd"}
    for ax, ctx in zip(axes, (65536, 200000)):
        sel = [r for r in rows if r["context"] == ctx and r["heads"] == 8 and r["batch"] == 1
               and r["page_size"] == 1 and r["scattered"]]
        for tree, colour in colours.items():
            for kernel in WIDE_KERNELS:  # gluon64 solid, seesaw dotted (when swept)
                pts = sorted((r["nsplit"], r["roofline_share"]) for r in sel
                             if r["kernel"] == f"split_{kernel}" and r["tree"] == tree)
                if pts:
                    ax.plot(*zip(*pts), LINE_STYLES[kernel], marker="o", ms=3, color=colour,
                            label=f"{kernel}, T={tree}")
            one = [(r["nsplit"], r["roofline_share"]) for r in sel
                   if r["kernel"] == "split_gluon" and r["tree"] == tree]
            if one:
                ax.plot(*zip(*one), "x", color=colour, ms=8)
            pick = [(r["nsplit"], r["roofline_share"]) for r in sel if r["tree"] == tree
                    and r["kernel"] == f"split_{r['plan_kernel']}"
                    and r["nsplit"] == r["plan_nsplit"]]
            if pick:
                ax.plot(*zip(*pick), "o", mfc="none", mec="k", ms=10)
        _nsplit_axis(ax, f"batch 1, {_tokens(ctx)} context, 8 heads, page 1 "
                         f"(x: gluon, circle: chooser)")
    axes[0].set_ylabel("share of the roofline (max of the two floors / time)")
    axes[1].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def machine() -> dict:
    """GPU name, SM count, driver, torch/triton/CUDA versions and the UTC date."""
    import triton

    p = torch.cuda.get_device_properties(0)
    try:
        import pynvml

        pynvml.nvmlInit()
        driver = pynvml.nvmlSystemGetDriverVersion()
        driver = driver.decode() if isinstance(driver, bytes) else driver
    except Exception:  # noqa: BLE001 - NVML missing: the driver stays unknown
        driver = None
    return {"gpu": p.name, "sms": p.multi_processor_count, "l2_mb": p.L2_cache_size / 2**20,
            "driver": driver, "torch": torch.__version__, "triton": triton.__version__,
            "cuda": torch.version.cuda, "date_utc": datetime.now(UTC).isoformat(timespec="seconds")}


#: The verify the sustained loop runs: batch 8, 64k context, 4-node trees, 8 heads, page 1
#: (a bandwidth-bound decode step: 32 query rows per cache row, 60 FLOP per byte).
SUSTAIN_POINT = Point(8, 65536, 4, 8, 1)


def sustain(seconds: float, kernel: str, pt: Point = SUSTAIN_POINT, idle: float = 8.0,
            log=print) -> dict:
    """Idle ``idle`` s, then the verify of ``pt`` with ``kernel`` (``"auto"``: the chooser's
    kernel) at the chooser's split back to back for ``seconds``, then idle again; the times
    (epoch s) of each stretch, the calls made and the shape."""
    from tealeaves.kernels_bench.verify_triton import SplitPlan

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    inp = make_inputs(pt.batch, pt.context, pt.tree, pt.heads, pt.page_size, device="cuda",
                      seed=7)
    kernel, ns = choose_plan(pt.batch, pt.heads, pt.tree, pt.context, sms,
                             kernel=None if kernel == "auto" else kernel)
    plan = SplitPlan(inp, ns, kernel=kernel)
    plan()
    torch.cuda.synchronize()
    marks = {"idle_start": time.time()}
    time.sleep(idle)
    marks["decode_start"] = time.time()
    n = 0
    while time.time() - marks["decode_start"] < seconds:
        for _ in range(50):
            plan()
        torch.cuda.synchronize()
        n += 50
    marks["decode_end"] = time.time()
    time.sleep(idle)
    marks["idle_end"] = time.time()
    marks.update(calls=n, kernel=kernel, nsplit=ns, **asdict(pt),
                 gbps=kv_bytes(inp) * n / (marks["decode_end"] - marks["decode_start"]) / 1e9)
    log(f"sustained {n} verify calls in {seconds:.0f} s ({marks['gbps']:.0f} GB/s)")
    return marks


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m tealeaves.kernels_bench.verify_bench``."""
    ap = argparse.ArgumentParser(prog="tealeaves bench verify-attention")
    add_arguments(ap)
    return run(ap.parse_args(argv), ap.error)


def run(args: argparse.Namespace, error) -> int:
    """``tealeaves bench verify-attention`` with parsed options (``verify_args``);
    ``error(message)`` refuses a bad combination of them (it must not return)."""
    why_not = combination_error(args)
    if why_not:
        error(why_not)
    pool = tree_points(args.validate) if args.trees else sweep_points(args.quick, args.validate)
    points = [p for p in pool if args.contexts is None or p.context in args.contexts]
    if not points and not args.sustain:
        error(f"--contexts: no point of this sweep has these contexts (its contexts: "
              f"{', '.join(str(c) for c in sorted({p.context for p in pool}))})")
    if not torch.cuda.is_available():
        print("verify-attention needs a CUDA GPU (and Triton)", file=sys.stderr)
        return 3
    from tealeaves.kernels_bench.verify_triton import gluon_ready

    why = gluon_ready()
    default = [WIDE_KERNEL, "gluon"] if args.trees else ["gluon", "triton"]
    kernels = args.kernels or (["triton"] if why else default)
    if why and any(k in HOPPER_KERNELS for k in kernels):
        print(f"--kernels {','.join(kernels)}: {why}", file=sys.stderr)
        return 2
    point = Point(*args.point) if args.point else SUSTAIN_POINT
    try:  # before any work: a bad --out must not cost a sweep
        args.out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=args.out):
            pass
    except OSError as exc:
        error(f"--out {args.out}: cannot write there ({exc.strerror or exc})")
    if args.sustain:
        # the chooser's kernel on Hopper; off Hopper the portable one (kernels is ["triton"])
        marks = sustain(args.sustain, kernels[0] if args.kernels or why else "auto", point)
        (args.out / "sustain.json").write_text(json.dumps(marks, indent=1))
        return 0
    info = machine()
    bw = copy_bandwidth()
    mm = matmul_rate()
    mm_sustained = matmul_rate(warm_s=SUSTAINED_S)
    info.update(copy_gbps=bw / 1e9, matmul_tflops=mm / 1e12,
                matmul_sustained_tflops=mm_sustained / 1e12, kernels=kernels)
    print(f"{info['gpu']} ({info['sms']} SMs), driver {info['driver']}: copy {bw / 1e9:.0f} GB/s"
          f" (read + write), bf16 matmul {mm / 1e12:.0f} TFLOP/s (the ceiling; "
          f"{mm_sustained / 1e12:.0f} sustained after {SUSTAINED_S:g} s); "
          f"kernels {', '.join(kernels)}", flush=True)
    import csv

    rows: list[dict] = []
    t0 = time.time()
    stem = ("verify_attention_trees" if args.trees else "verify_attention") + (
        "_validate" if args.validate else "")
    (args.out / f"{stem}.json").write_text(json.dumps(info, indent=1))
    with open(args.out / f"{stem}.csv", "w", newline="") as f:
        w = None
        for pt in points:  # a cut run keeps its rows
            print(f"{pt}", flush=True)
            new = run_point(pt, bw, mm, info["sms"], kernels=kernels,
                            baseline=not (args.no_baseline or args.trees),
                            window=4 if args.trees and not args.validate else None,
                            check=("all", ) if args.trees else (1, "chosen", 256))
            if w is None:
                w = csv.DictWriter(f, fieldnames=list(new[0]))
                w.writeheader()
            w.writerows(new)
            f.flush()
            rows += new
    info["sweep_s"] = time.time() - t0
    (args.out / f"{stem}.json").write_text(json.dumps(info, indent=1))
    if not args.validate:  # the held-out shapes lie outside the plots' panels
        (plot_trees if args.trees else plot)(rows, args.out / f"{stem}.png")
    bad = [r for r in rows if not (r["rel_err"] != r["rel_err"] or r["rel_err"] < BF16_TOL)]
    print(f"{len(rows)} rows, {sum(r['rel_err'] == r['rel_err'] for r in rows)} checked, "
          f"{len(bad)} over {BF16_TOL:g}; sweep {info['sweep_s']:.0f} s")
    return 1 if bad else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
