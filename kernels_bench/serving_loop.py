"""A serving loop shaped like SGLang's and vLLM's, for labelled traces of the engines people run.

Not ``generate()``: a scheduler serves a stream of requests on one GPU with the habits of the
production engines (SGLang's and vLLM's, ``docs/measurement.md``, "Server signals"):

- **Decode replays CUDA graphs**, one per (batch bucket, tokens per request, context bucket),
  captured once with one shared memory pool (SGLang's ``cuda_graph_runner``, vLLM's
  ``CUDAGraphWrapper``): batch buckets 1/2/4/8/16, padded rows write to free slots.
- **Chunked prefill** under two policies (``--policy``): ``sglang`` runs prefill batches alone and
  first whenever requests wait (SGLang's default scheduler: ``get_new_batch_prefill`` before the
  running batch), packing new requests up to ``--chunk`` tokens (SGLang's
  ``--chunked-prefill-size``, 4096 here); ``vllm`` packs every running decode with one prefill
  chunk into each step up to ``--chunk`` tokens (vLLM V1's ``max_num_batched_tokens``), run
  eagerly as vLLM runs a mixed batch outside its full graphs.
- **Speculative decoding** (``--tree N``): each decode round is ``--draft-steps`` forwards of a
  two-layer draft model (graphs too) and one verify forward of the target over an N-node draft
  tree per request (ancestor-only mask against the whole context), as SGLang's EAGLE/DFlash
  verify; the accepted length is drawn per round (1 to the draft depth + 1).
- **Models** (``ARCHS``): three MoE shapes whose experts run as one grouped GEMM
  (``torch._grouped_mm`` over tokens sorted by expert, counts by ``scatter_add_`` so the graphs
  capture), and one dense model.  ``kimi_moe`` is Kimi K2 / DeepSeek-V3's shape scaled down
  (one latent KV head shared by all query heads, as MLA's absorbed decode; 64 routed experts
  top-8 plus a shared one); ``qwen3_moe`` 128 experts top-8 with GQA; ``mixtral`` 8 wide
  experts top-2; ``dense`` a Llama-style MLP.  Random weights; contexts to 40k tokens.
- **Arrivals** (``--pattern``): ``poisson`` at a rate that changes every few seconds, ``bursts``
  of 1-16 requests, ``trickle`` (single requests with idle gaps of 0.05-0.4 s, shorter than a
  window).  Prompts short (32-2k) or long (8k-32k, ``--long-share``).

Ground truth comes from the loop: every forward is stamped between two device synchronisations
with its prefill and decode token counts (``*.forwards.csv``: start, end, prefill_tokens,
decode_tokens, sequences, kind).  A forward's phase is its token majority (a verify's and a
draft's tokens are decode: ``docs/measurement.md``, "Terms"); the labels (``*.labels.csv``)
merge forwards as ``hf_serving.intervals`` does, a gap of 0.05 s or more being idle.  Beside them
the loop writes what a real server gives a user: SGLang-format scheduler lines
(``*.sglang.log``, 0.5.5+ fields, milliseconds as with ``SGLANG_LOG_MS=1``) and a ``/metrics``
page scraped every second and appended (``*.metrics.prom``) with
``sglang:realtime_tokens_total{mode}`` and ``sglang:forward_execution_seconds_total{category}``
counters.

Requires torch with CUDA (the H200 image's torch 2.11; not a dependency of tealeaves); ``--tiny
--device cpu`` runs a small eager version on the CPU (no graphs, experts in a loop) for tests.
``python -m tealeaves.kernels_bench.serving_loop --help``.
"""

from __future__ import annotations

import argparse
import csv
import math
import random
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from tealeaves.kernels_bench.serving_model import (
    ARCHS,
    BATCH_BUCKETS,
    CTX_BUCKETS,
    TINY_CTX_BUCKETS,
    TINY_VOCAB,
    VOCAB,
    DecodeGraphs,
    Model,
    model_shape,
    tree_ancestors,
)
from tealeaves.kernels_bench.serving_signals import SglangLines, metrics_scrape

#: A gap between forwards of at least this is idle (``docs/measurement.md``, "Terms": phase
#: shares).
IDLE_GAP_S = 0.05


@dataclass
class Request:
    """One request: prompt tokens, tokens to generate, progress."""

    rid: int
    arrival: float
    prompt: int
    out: int
    done_prompt: int = 0
    generated: int = 0
    slot: int = -1


@dataclass
class Counters:
    """What the engine's ``/metrics`` would count (SGLang names)."""

    prefill_tokens: int = 0
    decode_tokens: int = 0
    prefill_s: float = 0.0
    decode_s: float = 0.0
    finished: int = 0
    accepted: int = 0
    rounds: int = 0
    rows: list = field(default_factory=list)


def arrivals(pattern: str, seconds: float, rng: random.Random) -> list[tuple[float, int]]:
    """Arrival offsets (s from the start) and how many requests come then: ``poisson`` at a
    rate redrawn every 3-8 s (0, 0.5, 1.5, 4 or 8 requests/s), ``bursts`` of 1-16 requests 0.3-4
    s apart, ``trickle`` one request at a time 0.05-0.4 s after the previous is expected to end
    (idle gaps shorter than a window), now and then a pause of 1-3 s."""
    out: list[tuple[float, int]] = []
    t = rng.uniform(0.5, 1.5)
    if pattern == "poisson":
        from tealeaves.kernels_bench.hf_serving import poisson_arrivals

        out = poisson_arrivals(t, seconds, rng, (0.0, 0.5, 1.5, 4.0, 8.0))
    elif pattern == "bursts":
        while t < seconds:
            out.append((t, rng.choice([1, 2, 4, 8, 12, 16])))
            t += rng.uniform(0.3, 4.0)
    elif pattern == "trickle":
        while t < seconds:
            out.append((t, 1))
            t += rng.uniform(0.25, 0.9) + (rng.uniform(1.0, 3.0) if rng.random() < 0.1 else 0)
    else:
        raise ValueError(f"--pattern: {pattern!r} is not poisson, bursts or trickle")
    return out


class Engine:
    """The scheduler: waiting queue, running batch, the policy's step choice, ground truth.

    Args:
        model, draft: target and (``tree`` > 0) draft ``Model``.
        policy: "sglang" (prefill batches alone, first) or "vllm" (decodes and one prefill
            chunk packed per step).
        chunk: tokens per prefill batch / per step.
        tree: draft-tree nodes verified per request (0: plain decode).
        draft_steps: draft forwards per round.
        log: an ``SglangLines`` writer or None.
    """

    def __init__(self, model: Model, draft: Model | None, policy: str, chunk: int, tree: int,
                 draft_steps: int, slots: int, ctx_buckets, use_graphs: bool,
                 rng: random.Random, log=None) -> None:
        self.m, self.draft, self.policy, self.chunk = model, draft, policy, chunk
        self.tree, self.draft_steps, self.slots, self.rng = tree, draft_steps, slots, rng
        self.graphs = DecodeGraphs(model, ctx_buckets, use_graphs)
        self.dgraphs = DecodeGraphs(draft, ctx_buckets, use_graphs) if draft else None
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self.prefilling: list[Request] = []
        self.c = Counters()
        self.log = log
        self.sync = (model.torch.cuda.synchronize if model.device.startswith("cuda")
                     else (lambda: None))
        self.decode_steps_since_log = 0
        self.decode_tokens_since_log = 0
        self.since_log = time.time()
        self.capture_s = 0.0

    def capture(self) -> int:
        """Capture the decode graphs (and the verify and draft ones under ``tree``)."""
        n = self.graphs.capture(self.tree if self.tree else 1)
        if self.dgraphs:
            n += self.dgraphs.capture(1)
        return n

    # -- bookkeeping -------------------------------------------------------------------------
    def _record(self, t0: float, t1: float, prefill: int, decode: int, seqs: int, kind: str):
        self.c.rows.append((t0, t1, prefill, decode, seqs, kind))
        if prefill >= decode and prefill > 0:
            self.c.prefill_s += t1 - t0
        else:
            self.c.decode_s += t1 - t0
        self.c.prefill_tokens += prefill
        self.c.decode_tokens += decode

    def _ids(self, n: int):
        torch = self.m.torch
        return torch.randint(1, self.m.vocab, (n,), device=self.m.device)

    def _admit(self) -> None:
        """Waiting requests take free slots (after the running and prefilling ones)."""
        while self.waiting and len(self.running) + len(self.prefilling) < self.slots:
            r = self.waiting.popleft()
            r.slot = len(self.running) + len(self.prefilling)
            self.prefilling.append(r)

    def _chunks(self, budget: int) -> list[tuple[Request, int]]:
        out = []
        for r in self.prefilling:
            if budget <= 0:
                break
            n = min(r.prompt - r.done_prompt, budget)
            out.append((r, n))
            budget -= n
        return out

    def _finish_prefills(self) -> None:
        """Requests whose whole prompt is cached join the running batch, taking slot n (the
        first after the running ones): the scheduler keeps running requests in 0..n-1."""
        for r in sorted((r for r in self.prefilling if r.done_prompt >= r.prompt),
                        key=lambda r: r.slot):
            self.prefilling.remove(r)
            dst = len(self.running)
            if r.slot != dst:
                # the prefilling request in slot dst trades places with this one
                other = next((o for o in self.prefilling if o.slot == dst), None)
                self.m.swap_slots(r.slot, r.prompt, dst, other.done_prompt if other else 0)
                if other is not None:
                    other.slot = r.slot
                r.slot = dst
            r.generated = 1  # prefill's last logits give the first token
            self.running.append(r)

    def _retire(self) -> None:
        for r in [r for r in self.running if r.generated >= r.out]:
            i = self.running.index(r)
            last = self.running[-1]
            if last is not r:
                self.m.move_slot(last.slot, r.slot, last.prompt + last.generated)
                last.slot = r.slot
                self.running[i] = last
            self.running.pop()
            self.c.finished += 1
            # prefilling requests keep their slots, packed after the running ones
            for j, o in enumerate(sorted(self.prefilling, key=lambda o: o.slot)):
                want = len(self.running) + j
                if o.slot != want:
                    self.m.move_slot(o.slot, want, o.done_prompt)
                    o.slot = want

    # -- steps -------------------------------------------------------------------------------
    def prefill_step(self, with_decode: bool) -> None:
        """A prefill batch (``sglang``) or a mixed step (``vllm``: every running decode plus
        prefill chunks up to the budget), eager."""
        torch = self.m.torch
        dec_n = len(self.running) if with_decode else 0
        chunks = self._chunks(self.chunk - dec_n)
        if not chunks:
            return
        n_pre = sum(n for _, n in chunks)
        dec = None
        if dec_n:
            lens = [r.prompt + r.generated - 1 for r in self.running]
            c = next(x for x in self.graphs.ctx if x >= max(lens) + 1)
            st = self.graphs._inputs(dec_n, 1, c)
            st["lens"].copy_(torch.tensor(lens))
            g = self.m.s["heads"] // self.m.s["kv_heads"]
            pos = torch.arange(c, device=self.m.device)
            mask = (pos[None, :] <= st["lens"][:, None]).repeat(1, g).view(dec_n, g, c)
            dec = {"n_b": dec_n, "t": 1, "c": c, "mask": mask.unsqueeze(1),
                   "slot_idx": torch.arange(dec_n, device=self.m.device),
                   "pos_idx": st["lens"]}
        pre = [(r.slot, r.done_prompt, n) for r, n in chunks]
        self.sync()
        t0 = time.time()
        logits = self.m.forward(self._ids(dec_n + n_pre), dec, pre)
        logits.argmax(-1)
        self.sync()
        t1 = time.time()
        kind = "mixed" if dec_n else "prefill"
        self._record(t0, t1, n_pre, dec_n, dec_n + len(chunks), kind)
        for r, n in chunks:
            r.done_prompt += n
        for r in self.running[:dec_n]:
            r.generated += 1
        if self.log:
            self.log.prefill(len(chunks), n_pre, len(self.running), len(self.waiting),
                             self._usage())
        self._finish_prefills()
        self._retire()

    def decode_step(self) -> None:
        """A decode step from the graphs, or under ``tree`` a round: the draft's forwards then
        the target's verify of the tree."""
        lens = [r.prompt + r.generated - 1 for r in self.running]
        n = len(lens)
        accepted = n
        if self.tree:
            for _ in range(self.draft_steps):
                self.sync()
                t0 = time.time()
                self.dgraphs.step(lens, 1)
                self.sync()
                self._record(t0, time.time(), 0, n, n, "draft")
            anc = tree_ancestors(self.tree, self.rng)
            self.sync()
            t0 = time.time()
            self.graphs.step(lens, self.tree, anc)
            self.sync()
            self._record(t0, time.time(), 0, n * self.tree, n, "verify")
            acc = [self.rng.randint(1, self.draft_steps + 1) for _ in range(n)]
            for r, a in zip(self.running, acc, strict=True):
                r.generated += a
            accepted = sum(acc)
            self.c.accepted += accepted
            self.c.rounds += n
        else:
            self.sync()
            t0 = time.time()
            out = self.graphs.step(lens, 1)
            out.argmax(-1)
            self.sync()
            self._record(t0, time.time(), 0, n, n, "decode")
            for r in self.running:
                r.generated += 1
        if self.log:
            self.decode_steps_since_log += 1
            self.decode_tokens_since_log += accepted
            if self.decode_steps_since_log >= 40:  # SGLang's --decode-log-interval
                now = time.time()
                gen = self.decode_tokens_since_log / max(now - self.since_log, 1e-9)
                acc_len = (self.c.accepted / self.c.rounds) if self.c.rounds else None
                self.log.decode(len(self.running), self._tokens(), self._usage(), gen,
                                len(self.waiting), acc_len)
                self.decode_steps_since_log = self.decode_tokens_since_log = 0
                self.since_log = now
        for r in self.running:  # a request never outgrows its slot's context
            r.out = min(r.out, self.m.k_cache.shape[2] - r.prompt - self.tree - 2)
        self._retire()

    def _tokens(self) -> int:
        return sum(r.prompt + r.generated for r in self.running)

    def _usage(self) -> float:
        return self._tokens() / float(self.slots * self.m.k_cache.shape[2])

    def step(self) -> bool:
        """Run the policy's next step; False when there is nothing to run."""
        self._admit()
        if self.prefilling:
            self.prefill_step(with_decode=self.policy == "vllm")
            return True
        if self.running:
            self.decode_step()
            return True
        return False


def serve(engine: Engine, seconds: float, pattern: str, rng: random.Random, long_share: float,
          tiny: bool, metrics_path: Path | None) -> int:
    """Feed arrivals to the engine for ``seconds``, then drain what is left (at most 10 s);
    returns the requests that arrived."""
    t_start = time.time()
    plan = deque(arrivals(pattern, seconds, rng))
    rid = 0
    next_scrape = t_start
    mfh = metrics_path.open("w") if metrics_path else None
    try:
        while True:
            now = time.time()
            while plan and plan[0][0] <= now - t_start:
                _, n = plan.popleft()
                for _ in range(n):
                    long = rng.random() < long_share
                    p = rng.randint(8192, 32768) if long else int(
                        math.exp(rng.uniform(math.log(32), math.log(2048))))
                    o = rng.choice([8, 16, 32, 64] if pattern == "trickle" else
                                   [16, 32, 64, 128, 256, 512])
                    if pattern == "trickle":
                        p = min(p, 2048)
                    if tiny:
                        p, o = max(4, p // 64), max(2, o // 16)
                    engine.waiting.append(Request(rid, now, p, o))
                    rid += 1
            if mfh and now >= next_scrape:
                mfh.write(metrics_scrape(engine, now))
                next_scrape += 1.0
            busy = engine.step()
            if not busy:
                if not plan or now - t_start > seconds + 10:
                    break
                wait = t_start + plan[0][0] - time.time()
                time.sleep(max(0.0, min(wait, next_scrape - time.time(), 0.25)))
            elif now - t_start > seconds + 10:
                break
        if mfh:
            mfh.write(metrics_scrape(engine, time.time()))
    finally:
        if mfh:
            mfh.close()
    return rid


def intervals_of(rows, t_begin: float, t_end: float, what: str) -> list[list]:
    """Label intervals from forward rows (``hf_serving.intervals``: token majority, gaps of
    ``IDLE_GAP_S`` or more idle)."""
    from tealeaves.kernels_bench.hf_serving import intervals

    return intervals([r[:5] for r in rows], idle_gap_s=IDLE_GAP_S, t_begin=t_begin,
                     t_end=t_end, what=what)


def run(labels_path: str | Path, arch: str = "kimi_moe", policy: str = "sglang",
        pattern: str = "poisson", seconds: float = 40.0, seed: int = 0, tree: int = 0,
        draft_steps: int = 3, chunk: int | None = None, long_share: float = 0.2,
        device: str = "cuda", tiny: bool = False, graphs: bool = True,
        log=print) -> dict:
    """Serve for about ``seconds``; write the labels, forwards, SGLang log and metrics beside
    ``labels_path`` (``X.labels.csv`` -> ``X.forwards.csv``, ``X.sglang.log``,
    ``X.metrics.prom``).

    Returns:
        A summary dict: requests, forwards, shares of time per phase, graphs captured,
        capture seconds, mixed forwards, median forward ms.

    Raises:
        ValueError: an unknown arch, policy or pattern.
    """
    import torch

    if arch not in ARCHS:
        raise ValueError(f"--arch: {arch!r} is not one of {', '.join(sorted(ARCHS))}")
    if policy not in ("sglang", "vllm"):
        raise ValueError(f"--policy: {policy!r} is not sglang or vllm")
    rng = random.Random(seed)
    on_gpu = device.startswith("cuda")
    slots = max(BATCH_BUCKETS)
    ctx = TINY_CTX_BUCKETS if tiny else CTX_BUCKETS
    chunk = chunk or ((4096 if policy == "sglang" else 2048) if not tiny else 64)
    vocab = TINY_VOCAB if tiny else VOCAB
    torch.manual_seed(seed)
    model = Model(model_shape(arch, tiny), slots, max(ctx), device, seed, vocab)
    draft = Model(model_shape("draft", tiny), slots, max(ctx), device, seed + 1, vocab) \
        if tree else None
    labels_path = Path(labels_path)
    stem = labels_path.name.replace(".labels.csv", "")
    sg = SglangLines(labels_path.with_name(stem + ".sglang.log"))
    engine = Engine(model, draft, policy, chunk, tree, draft_steps, slots, ctx,
                    graphs and on_gpu, rng, sg)
    t0 = time.perf_counter()
    with torch.inference_mode():
        n_graphs = engine.capture()
        capture_s = time.perf_counter() - t0
        # warm up the eager paths (prefill kernels, autotuning) before the clock starts
        warm = Engine(model, draft, policy, chunk, tree, draft_steps, slots, ctx, False,
                      random.Random(seed + 99))
        warm.graphs = engine.graphs
        warm.dgraphs = engine.dgraphs
        for p in (64, 200 if tiny else 16384):
            warm.waiting.append(Request(-1, time.time(), p, 4))
        while warm.step():
            pass
        engine.sync()
        t_begin = time.time()
        n = serve(engine, seconds, pattern, rng, long_share, tiny,
                  labels_path.with_name(stem + ".metrics.prom"))
        engine.sync()
        t_end = time.time()
    sg.close()
    what = (f"serving_loop {arch} {policy} {pattern}" + (f" tree {tree}" if tree else ""))
    rows = intervals_of(engine.c.rows, t_begin, t_end, what)
    _write_truth(labels_path, labels_path.with_name(stem + ".forwards.csv"), rows,
                 engine.c.rows)
    fw = sorted(engine.c.rows)
    span = max(t_end - t_begin, 1e-9)
    share = {ph: sum(r[1] - r[0] for r in rows if r[2] == ph) / span
             for ph in ("idle", "prefill", "decode")}
    durs = sorted(r[1] - r[0] for r in fw)
    summary = {"requests": n, "finished": engine.c.finished, "forwards": len(fw),
               "shares": share, "graphs": n_graphs, "capture_s": capture_s,
               "mixed_forwards": sum(1 for r in fw if r[5] == "mixed"),
               "median_forward_ms": durs[len(durs) // 2] * 1e3 if durs else float("nan"),
               "prefill_forward_ms_p10_p90": _pct([r[1] - r[0] for r in fw
                                                   if r[2] >= r[3] and r[2] > 0])}
    log(f"{what}: {n} requests ({engine.c.finished} finished), {len(fw)} forwards, "
        + ", ".join(f"{ph} {v:.0%}" for ph, v in share.items())
        + f"; {n_graphs} graphs in {capture_s:.1f} s; {summary['mixed_forwards']} mixed; "
        f"median forward {summary['median_forward_ms']:.1f} ms; prefill forwards p10/p90 "
        f"{summary['prefill_forward_ms_p10_p90']}")
    return summary


def _write_truth(labels_path: Path, forwards_path: Path, rows: list, forwards: list) -> None:
    """Write the labels (``start,end,phase,hot_gpu,workload``, from ``intervals_of``) and the
    forwards (``start,end,prefill_tokens,decode_tokens,sequences,kind``, sorted)."""
    with labels_path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["start", "end", "phase", "hot_gpu", "workload"])
        for s, e, ph, wk in rows:
            w.writerow([f"{s:.6f}", f"{e:.6f}", ph, "", wk])
    with forwards_path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["start", "end", "prefill_tokens", "decode_tokens", "sequences", "kind"])
        for r in sorted(forwards):
            w.writerow([f"{r[0]:.6f}", f"{r[1]:.6f}", *r[2:]])


def _pct(xs: list[float]) -> str:
    if not xs:
        return "n/a"
    xs = sorted(xs)
    return (f"{xs[int(0.1 * (len(xs) - 1))] * 1e3:.0f}/"
            f"{xs[int(0.9 * (len(xs) - 1))] * 1e3:.0f} ms")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tealeaves.kernels_bench.serving_loop",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--labels", type=Path, required=True, help="label CSV to write")
    ap.add_argument("--arch", choices=sorted(ARCHS), default="kimi_moe")
    ap.add_argument("--policy", choices=("sglang", "vllm"), default="sglang")
    ap.add_argument("--pattern", choices=("poisson", "bursts", "trickle"), default="poisson")
    ap.add_argument("--seconds", type=float, default=40.0)
    ap.add_argument("--tree", type=int, default=0,
                    help="draft-tree nodes verified per request (0: no speculative decoding)")
    ap.add_argument("--draft-steps", type=int, default=3)
    ap.add_argument("--chunk", type=int, default=None,
                    help="prefill tokens per batch/step (default sglang 4096, vllm 2048)")
    ap.add_argument("--long-share", type=float, default=0.2,
                    help="share of requests with 8k-32k-token prompts")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--no-graphs", action="store_true", help="eager decode")
    ap.add_argument("--tiny", action="store_true", help="tiny shapes (CPU smoke run)")
    a = ap.parse_args(argv)
    if not (math.isfinite(a.seconds) and a.seconds > 0):
        ap.error("--seconds must be a positive number")
    if a.tree < 0 or a.tree > 64:
        ap.error("--tree must be 0-64")
    if a.draft_steps < 1:
        ap.error("--draft-steps must be at least 1")
    if a.chunk is not None and a.chunk < 1:
        ap.error("--chunk must be at least 1 token")
    if not 0 <= a.long_share <= 1:  # NaN too
        ap.error("--long-share must be a share from 0 to 1")
    if not a.labels.parent.is_dir():
        ap.error(f"--labels {a.labels}: {a.labels.parent} is not a folder")
    run(a.labels, a.arch, a.policy, a.pattern, a.seconds, a.seed, a.tree, a.draft_steps,
        a.chunk, a.long_share, a.device, a.tiny, not a.no_graphs,
        log=lambda s: print(s, flush=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
