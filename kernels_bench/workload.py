"""Labelled GPU workloads: ground truth for the phase classifier and the imbalance flag.

One host thread drives every visible GPU like the ranks of one tensor-parallel group: each
step every GPU runs its share, a small activation is all-reduced through GPU 0 (peer copies),
and the host waits for every GPU before the next step.  A GPU given more work (a hot expert
shard) therefore makes the others wait, as a straggler rank does at TP8.

Step kinds (Kimi K2.6's shapes per TP8 rank, ``docs/measurement.md``, "Kimi K2.6 per TP8
rank", scaled to fit a step in a few ms); each is labelled ``idle``, ``prefill`` or ``decode``:

- ``idle``: nothing runs.
- ``prefill``: bf16 GEMMs over ``tokens`` (1k-32k; default cycles 2k/4k/8k) x hidden 7168 and
  causal attention (flash SDPA, 8 heads x 128) over the same tokens: compute-bound.
- ``decode``: ``batch`` tokens (1-64) through a dense weight shard (7168 x 65536 bf16, 0.94 GB),
  routed experts as batched GEMMs (7168 -> 4096 gate/up, 2048 -> 7168 down; 88 MB per expert;
  8 per GPU when balanced) and MLA-style attention of one query per request x 8 heads over a
  latent KV cache (``context`` tokens x 576, V = first 512): memory-bound.
- ``decode``, kind ``verify``: speculative verification, as above with ``nodes`` draft-tree
  nodes (16-256) per request attending over ``context`` (4k-128k) tokens.
- ``decode``, kind ``launch``: launch-bound decode, a few hundred tiny kernels per step (a small
  model's eager decode): GPU busy by NVML's coarse measure, every counter low.
- ``prefill``, kind ``chunked``: chunked prefill interleaved with decode: one prefill chunk of
  ``tokens`` then ``decode_steps`` decode steps, repeated (a long prompt being prefilled while
  requests decode; SGLang logs a ``Prefill batch`` line per chunk).
- ``hot_gpu=k``: GPU k runs ``hot_experts`` experts instead of 8 (expert skew);
  ``rotate_s``: the hot GPU moves to the next GPU every ``rotate_s`` seconds.

Ground truth is written as it goes: one CSV row per stretch, ``start,end,phase,hot_gpu,workload``
in UTC epoch seconds, stamped after the GPUs synchronised, so each boundary is exact to one step;
a rotating hot GPU gets one row per stint.  ``workload`` says which kind ran, with its sizes.

Requires torch with CUDA (the ``bench`` extra); ``Workload(device_type="cpu", dims=TINY)`` runs
the same code on the CPU at toy sizes, for tests.
"""

from __future__ import annotations

import csv
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path


@dataclass(frozen=True)
class Dims:
    """Buffer sizes (elements).  ``FULL``: Kimi K2.6 per TP8 rank, scaled; ``TINY``: tests."""

    hidden: int = 7168
    dense: int = 65536
    expert_width: int = 2048
    kv_latent: int = 576
    v_width: int = 512
    heads: int = 8
    head_dim: int = 128
    kv_tokens: int = 64 * 32768  # latent KV cache, shared by batch x context
    max_prefill: int = 32768
    max_batch: int = 64
    launch_width: int = 256
    launch_kernels: int = 300


FULL = Dims()
TINY = Dims(hidden=64, dense=256, expert_width=32, kv_latent=48, v_width=32, heads=2,
            head_dim=16, kv_tokens=64 * 256, max_prefill=512, max_batch=64, launch_width=16,
            launch_kernels=10)
PREFILL_CYCLE = (2048, 4096, 8192)


@dataclass(frozen=True)
class Phase:
    """One stretch of a schedule.

    Attributes:
        phase: ``idle``, ``prefill`` or ``decode`` (the label).
        seconds: duration.
        hot_gpu: GPU index running ``hot_experts`` experts; None when balanced.
        kind: ``""`` (plain), ``verify``, ``launch`` (decode) or ``chunked`` (prefill).
        tokens: prefill tokens per step, or the chunk size (None: cycle 2k/4k/8k).
        batch: decode requests per step.
        context: KV tokens per request (decode/verify).
        nodes: draft-tree nodes verified per request (``verify``).
        decode_steps: decode steps after each chunk (``chunked``).
        rotate_s: move the hot GPU to the next one every this many seconds (needs hot_gpu).
    """

    phase: str
    seconds: float
    hot_gpu: int | None = None
    kind: str = ""
    tokens: int | None = None
    batch: int = 8
    context: int = 32768
    nodes: int = 1
    decode_steps: int = 2
    rotate_s: float | None = None

    def describe(self) -> str:
        """Short text for the labels' ``workload`` column, e.g. ``verify nodes=64 ctx=4096 b=2``."""
        if self.phase == "idle":
            return "idle"
        if self.phase == "prefill":
            tok = "2k/4k/8k" if self.tokens is None else str(self.tokens)
            if self.kind == "chunked":
                return f"chunked chunk={tok} decode_steps={self.decode_steps} b={self.batch}"
            return f"prefill tokens={tok}"
        if self.kind == "launch":
            return "launch-bound decode"
        base = (f"verify nodes={self.nodes}" if self.kind == "verify" else "decode") \
            + f" b={self.batch} ctx={self.context}"
        if self.rotate_s is not None:
            return base + f" rotate={self.rotate_s:g}s"
        return base


def default_schedule(n_gpus: int, scale: float = 1.0) -> list[Phase]:
    """The schedule recorded for the bundled trace (~95 s at scale 1): idle, prefill,
    balanced decode, then the hot expert shard on each GPU in turn, twice."""
    s = scale
    hot = list(range(n_gpus)) if n_gpus > 1 else [None]
    plan = [Phase("idle", 6 * s), Phase("prefill", 10 * s), Phase("decode", 10 * s)]
    plan += [Phase("decode", 10 * s, g) for g in hot]
    plan += [Phase("idle", 5 * s), Phase("prefill", 6 * s), Phase("decode", 8 * s)]
    plan += [Phase("decode", 7 * s, g) for g in reversed(hot)]
    plan += [Phase("prefill", 4 * s), Phase("idle", 5 * s)]
    return plan


# -- corpus scenarios (issue 5): each ~45-60 s, durations jittered by the seed -------------------
def _hot_list(n_gpus: int) -> list[int | None]:
    return list(range(n_gpus)) if n_gpus > 1 else [None]


def _prefill_lengths(n: int, rng: random.Random) -> list[Phase]:
    plan = [Phase("idle", 3)]
    for tok in (1024, 2048, 4096, 8192, 16384, 32768):
        plan.append(Phase("prefill", rng.uniform(3, 4), tokens=tok))
        plan.append(rng.choice([Phase("idle", 2), Phase("decode", 2.5, batch=rng.choice([4, 16]))]))
    return [*plan, Phase("idle", 3)]


def _decode_batch(n: int, rng: random.Random) -> list[Phase]:
    plan = [Phase("idle", 3), Phase("prefill", 3)]
    hot = _hot_list(n)
    for i, b in enumerate((1, 2, 4, 8, 16, 32, 64)):
        plan.append(Phase("decode", rng.uniform(3.5, 4.5), batch=b))
        if i % 2 and hot[0] is not None:
            plan.append(Phase("decode", 3, hot_gpu=hot[(i // 2) % len(hot)], batch=b))
        if i == 3:
            plan.append(Phase("idle", 2.5))
    return [*plan, Phase("idle", 3)]


def _verify_trees(n: int, rng: random.Random) -> list[Phase]:
    plan = [Phase("idle", 3), Phase("prefill", 3, tokens=8192)]
    combos = [(16, 4096, 4), (64, 16384, 4), (256, 4096, 1), (16, 131072, 1), (64, 65536, 2),
              (256, 131072, 1), (128, 32768, 2)]
    rng.shuffle(combos)
    for i, (nodes, ctx, b) in enumerate(combos):
        plan.append(Phase("decode", rng.uniform(3, 4), kind="verify", nodes=nodes, context=ctx,
                          batch=b))
        if i == 2:
            plan.append(Phase("prefill", 2.5, tokens=16384))
        if i == 4:
            plan.append(Phase("idle", 2.5))
    return [*plan, Phase("idle", 3)]


def _chunked(n: int, rng: random.Random) -> list[Phase]:
    return [Phase("idle", 3), Phase("decode", 4, batch=16),
            Phase("prefill", rng.uniform(4, 5), kind="chunked", tokens=2048, decode_steps=2,
                  batch=16),
            Phase("decode", 4, batch=16),
            Phase("prefill", rng.uniform(4, 5), kind="chunked", tokens=1024, decode_steps=4,
                  batch=32),
            Phase("idle", 2.5),
            Phase("prefill", rng.uniform(3, 4), kind="chunked", tokens=4096, decode_steps=1,
                  batch=8),
            Phase("decode", 4, batch=8),
            Phase("prefill", 3, kind="chunked", tokens=8192, decode_steps=2, batch=8),
            Phase("decode", 3, batch=8), Phase("idle", 3)]


def _launch_bound(n: int, rng: random.Random) -> list[Phase]:
    return [Phase("idle", 4), Phase("decode", rng.uniform(4, 5), kind="launch"),
            Phase("decode", 4, batch=8),
            Phase("decode", rng.uniform(4, 5), kind="launch"), Phase("idle", 4),
            Phase("prefill", 3), Phase("decode", rng.uniform(4, 5), kind="launch"),
            Phase("idle", 3), Phase("decode", 4, batch=1, context=4096),
            Phase("decode", 4, kind="launch"), Phase("idle", 3)]


def _skew_rotation(n: int, rng: random.Random) -> list[Phase]:
    hot = _hot_list(n)
    plan = [Phase("idle", 3), Phase("decode", 4)]
    plan += [Phase("decode", rng.uniform(3.5, 4.5), hot_gpu=g) for g in hot]
    if hot[0] is not None:
        plan.append(Phase("decode", 8, hot_gpu=hot[0], rotate_s=1.0))
        plan.append(Phase("decode", 4))
        plan.append(Phase("decode", 6, hot_gpu=hot[-1], rotate_s=2.0, batch=16))
    plan += [Phase("decode", 3.5, hot_gpu=g, kind="verify", nodes=64, context=16384, batch=2)
             for g in reversed(hot)]
    return [*plan, Phase("decode", 3), Phase("idle", 3)]


def _bursts(n: int, rng: random.Random) -> list[Phase]:
    hot = _hot_list(n)
    plan = [Phase("idle", 3)]
    t = 0.0
    while t < 40:
        g = rng.choice([*hot, None, None])
        d = Phase("decode", rng.uniform(2, 4.5), hot_gpu=g, batch=rng.choice([8, 16, 32]))
        p = Phase("prefill", rng.uniform(0.6, 1.6), tokens=rng.choice([4096, 8192, 16384]))
        plan += [d, p]
        t += d.seconds + p.seconds
    return [*plan, Phase("decode", 3), Phase("idle", 3)]


def _random(n: int, rng: random.Random) -> list[Phase]:
    hot = _hot_list(n)
    makers: list[Callable[[], Phase]] = [
        lambda: Phase("idle", rng.uniform(1.5, 4)),
        lambda: Phase("prefill", rng.uniform(1.5, 4), tokens=rng.choice([1024, 4096, 16384])),
        lambda: Phase("prefill", rng.uniform(2, 4), kind="chunked",
                      tokens=rng.choice([2048, 4096]), decode_steps=rng.choice([1, 2, 3])),
        lambda: Phase("decode", rng.uniform(2, 5), batch=rng.choice([1, 4, 16, 64]),
                      context=rng.choice([4096, 32768])),
        lambda: Phase("decode", rng.uniform(2, 5), hot_gpu=rng.choice(hot),
                      batch=rng.choice([8, 32])),
        lambda: Phase("decode", rng.uniform(2, 4), kind="verify",
                      nodes=rng.choice([16, 64, 256]), context=rng.choice([4096, 65536]),
                      batch=1, hot_gpu=rng.choice([*hot, None])),
        lambda: Phase("decode", rng.uniform(2, 4), kind="launch"),
    ]
    plan = [Phase("idle", 3)]
    while sum(p.seconds for p in plan) < 52:
        plan.append(rng.choice(makers)())
    return [*plan, Phase("idle", 3)]


SCENARIOS: dict[str, Callable[[int, random.Random], list[Phase]]] = {
    "prefill_lengths": _prefill_lengths,
    "decode_batch": _decode_batch,
    "verify_trees": _verify_trees,
    "chunked": _chunked,
    "launch_bound": _launch_bound,
    "skew_rotation": _skew_rotation,
    "bursts": _bursts,
    "random": _random,
}


def scenario_schedule(name: str, n_gpus: int, seed: int = 0, scale: float = 1.0) -> list[Phase]:
    """The named corpus scenario (``SCENARIOS``, or ``default``) for ``n_gpus`` GPUs.

    Durations are jittered by ``seed`` and multiplied by ``scale``.

    Raises:
        ValueError: unknown scenario name.
    """
    if name == "default":
        return default_schedule(n_gpus, scale)
    if name not in SCENARIOS:
        raise ValueError(f"unknown scenario {name!r}; one of default, {', '.join(SCENARIOS)}")
    plan = SCENARIOS[name](n_gpus, random.Random(f"{name}-{seed}"))
    return [replace(p, seconds=p.seconds * scale) for p in plan]


class _Rank:
    """Buffers of one GPU (weights and caches are random bf16: zeros run faster)."""

    def __init__(self, torch, device, dims: Dims, max_experts: int, seed: int) -> None:
        g = torch.Generator(device=device).manual_seed(seed)
        dt = torch.bfloat16 if device.type == "cuda" else torch.float32

        def rnd(*shape):
            return torch.randn(*shape, device=device, dtype=dt, generator=g) * 0.02

        d = dims
        self.device = device
        self.w_prefill = rnd(d.hidden, d.hidden * 16 // 7)
        self.w_dense = rnd(d.hidden, d.dense)
        self.w_dense_out = rnd(d.dense // 8, d.hidden)
        self.w_gate_up = rnd(max_experts, d.hidden, 2 * d.expert_width)
        self.w_down = rnd(max_experts, d.expert_width, d.hidden)
        self.kv = rnd(d.kv_tokens, d.kv_latent)
        self.x_decode = rnd(d.max_batch, d.hidden)
        self.q_verify = rnd(d.max_batch * 256 * d.heads, d.kv_latent)
        self.x_prefill = rnd(d.max_prefill, d.hidden)
        self.qkv_prefill = rnd(3, 1, d.heads, d.max_prefill, d.head_dim)
        self.w_small = rnd(d.launch_width, d.launch_width)
        self.x_small = rnd(1, d.launch_width)


class Workload:
    """Runs a schedule on the given devices and writes ground-truth intervals.

    Args:
        devices: device indices (default: all visible CUDA devices; ``[0]`` on the CPU).
        hot_experts: experts run by the hot GPU per decode step (balanced GPUs run 8).
        seed: random seed for the buffers.
        device_type: ``"cuda"``, or ``"cpu"`` for tests.
        dims: buffer sizes (``FULL``; ``TINY`` for tests).

    Raises:
        RuntimeError: torch is missing or sees no CUDA device; a bad ``hot_experts``.
    """

    BALANCED_EXPERTS = 8

    def __init__(self, devices: list[int] | None = None, hot_experts: int = 48,
                 seed: int = 0, device_type: str = "cuda", dims: Dims = FULL) -> None:
        try:
            import torch
        except ImportError as exc:
            raise RuntimeError("the workload needs torch with CUDA: pip install -e '.[bench]' "
                               "from a clone") from exc
        if device_type == "cuda" and not torch.cuda.is_available():
            raise RuntimeError("the workload needs a CUDA GPU; torch sees none")
        if hot_experts < self.BALANCED_EXPERTS:
            raise RuntimeError(f"hot_experts must be at least {self.BALANCED_EXPERTS}")
        self.torch = torch
        self.cuda = device_type == "cuda"
        if devices is None:
            devices = list(range(torch.cuda.device_count())) if self.cuda else [0]
        self.devices = devices
        self.dims = dims
        self.hot_experts = hot_experts
        self.ranks = [_Rank(torch, torch.device(device_type, d), dims, hot_experts, seed + d)
                      for d in self.devices]

    # -- one step per kind ---------------------------------------------------------------
    def _sync(self) -> None:
        if self.cuda:
            for r in self.ranks:
                self.torch.cuda.synchronize(r.device)

    def _prefill(self, r: _Rank, tokens: int):
        F = self.torch.nn.functional
        tokens = min(tokens, self.dims.max_prefill)
        h = r.x_prefill[:tokens] @ r.w_prefill
        q, k, v = (t[:, :, :tokens] for t in r.qkv_prefill)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return h[:1, : self.dims.hidden] + a[0, 0, :1, :1]

    def _attend(self, r: _Rank, batch: int, queries: int, context: int):
        """``queries`` latent queries per request over ``context`` KV tokens, ``batch``
        requests; the context is cut to fit the cache (``Dims.kv_tokens``). Returns a scalar."""
        torch, d = self.torch, self.dims
        ctx = min(context, d.kv_tokens // batch)
        kv = r.kv[: batch * ctx].view(batch, ctx, d.kv_latent)
        q = r.q_verify[: batch * queries].view(batch, queries, d.kv_latent)
        scores = torch.bmm(q, kv.transpose(1, 2)) * (1.0 / math.sqrt(d.kv_latent))
        o = torch.bmm(torch.softmax(scores.float(), -1).to(kv.dtype), kv[..., : d.v_width])
        return o.sum()

    def _decode(self, r: _Rank, experts: int, batch: int = 8, context: int = 32768,
                nodes: int = 1):
        torch, d = self.torch, self.dims
        x = r.x_decode[:batch]
        h = (x @ r.w_dense)[:, : d.dense // 8] @ r.w_dense_out
        xe = x.unsqueeze(0).expand(experts, -1, -1)
        gu = torch.bmm(xe, r.w_gate_up[:experts])
        act = torch.nn.functional.silu(gu[..., : d.expert_width]) * gu[..., d.expert_width:]
        h = h + torch.bmm(act, r.w_down[:experts]).sum(0)
        return h.sum(0, keepdim=True) + self._attend(r, batch, nodes * d.heads, context)

    def _launch(self, r: _Rank):
        x = r.x_small
        for _ in range(self.dims.launch_kernels):
            x = self.torch.tanh(x @ r.w_small)
        return r.x_decode[:1] + x.sum()

    def _rank_step(self, r: _Rank, rank_i: int, phase: Phase, i: int, hot: int | None):
        experts = self.hot_experts if hot is not None and self.devices[rank_i] == hot \
            else self.BALANCED_EXPERTS
        if phase.phase == "prefill":
            tokens = phase.tokens or PREFILL_CYCLE[i % len(PREFILL_CYCLE)]
            if phase.kind != "chunked" or i % (phase.decode_steps + 1) == 0:
                return self._prefill(r, tokens)
            return self._decode(r, experts, phase.batch, phase.context)
        if phase.kind == "launch":
            return self._launch(r)
        nodes = phase.nodes if phase.kind == "verify" else 1
        return self._decode(r, experts, phase.batch, phase.context, nodes)

    def step(self, phase: Phase, i: int, hot: int | None = None) -> None:
        """Run one synchronised step of ``phase`` on every device (step index ``i``);
        ``hot`` is the hot GPU for this step (default ``phase.hot_gpu``)."""
        torch = self.torch
        hot = phase.hot_gpu if hot is None else hot
        outs = []
        for rank_i, r in enumerate(self.ranks):
            if self.cuda:
                with torch.cuda.device(r.device):
                    outs.append(self._rank_step(r, rank_i, phase, i, hot))
            else:
                outs.append(self._rank_step(r, rank_i, phase, i, hot))
        # All-reduce through the first GPU, as TP ranks do after each layer.
        root = self.ranks[0].device
        total = sum(o.to(root, non_blocking=True) for o in outs)
        for r, o in zip(self.ranks, outs, strict=True):
            o.copy_(total.to(r.device, non_blocking=True))
        self._sync()

    def _warm_up(self, schedule: list[Phase]) -> None:
        """Every kernel shape of the schedule once, so compilation and cuBLAS heuristics stay
        out of the labelled phases."""
        seen = set()
        for ph in schedule:
            if ph.phase == "idle":
                continue
            key = (ph.phase, ph.kind, ph.tokens, ph.batch, ph.context, ph.nodes,
                   ph.hot_gpu is not None)
            if key in seen:
                continue
            seen.add(key)
            hot = self.devices[0] if ph.hot_gpu is not None else None
            for i in range(3 if ph.tokens is not None or ph.phase != "prefill" else 6):
                self.step(ph, i, hot)

    def _hot_at(self, ph: Phase, elapsed: float) -> int | None:
        if ph.hot_gpu is None or ph.rotate_s is None:
            return ph.hot_gpu
        k = self.devices.index(ph.hot_gpu) if ph.hot_gpu in self.devices else 0
        return self.devices[(k + int(elapsed / ph.rotate_s)) % len(self.devices)]

    def run(self, schedule: list[Phase], labels_path: str | Path, log=print,
            server_log=None) -> list[dict]:
        """Run ``schedule``, writing one label row per stretch to ``labels_path`` as it goes.

        ``server_log`` (a ``kernels_bench.sglang_log.SglangLogWriter``) also gets SGLang-style
        lines: a prefill batch line every 10 prefill steps (each chunk of chunked prefill),
        decode lines every 40 decode steps.

        Returns:
            The rows written (dicts with start, end, phase, hot_gpu, workload, steps).
        """
        self._warm_up(schedule)
        rows: list[dict] = []
        with Path(labels_path).open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["start", "end", "phase", "hot_gpu", "workload"])
            fh.flush()

            def close(ph: Phase, start: float, hot: int | None, n: int) -> float:
                self._sync()
                end = time.time()
                w.writerow([f"{start:.6f}", f"{end:.6f}", ph.phase,
                            "" if hot is None else hot, ph.describe()])
                fh.flush()
                rows.append({"start": start, "end": end, "phase": ph.phase, "hot_gpu": hot,
                             "workload": ph.describe(), "steps": n})
                ms = (end - start) * 1e3 / n if n else float("nan")
                log(f"{ph.phase:8s} hot={'' if hot is None else hot!s:2s} {end - start:6.2f} s "
                    f"{n:6d} steps {ms:7.2f} ms/step  {ph.describe()}")
                return end

            for ph in schedule:
                self._sync()
                start = time.time()
                t0 = time.monotonic()
                t_end = t0 + ph.seconds
                if ph.phase == "idle":
                    time.sleep(ph.seconds)
                    close(ph, start, None, 0)
                    continue
                if server_log is not None:
                    server_log.batch = ph.batch
                hot = self._hot_at(ph, 0.0)
                n = n_seg = 0
                while (now := time.monotonic()) < t_end:
                    step_hot = self._hot_at(ph, now - t0)
                    if step_hot != hot:  # a rotating hot GPU: one row per stint
                        start = close(ph, start, hot, n_seg)
                        hot, n_seg = step_hot, 0
                    self.step(ph, n, hot)
                    n += 1
                    n_seg += 1
                    if server_log is not None:
                        self._log_server(server_log, ph, n)
                close(ph, start, hot, n_seg)
        return rows

    @staticmethod
    def _log_server(server_log, ph: Phase, n: int) -> None:
        if ph.phase == "prefill" and ph.kind == "chunked":
            if (n - 1) % (ph.decode_steps + 1) == 0:
                server_log.prefill(1, ph.tokens or PREFILL_CYCLE[0])
            else:
                server_log.decode_step()
        elif ph.phase == "prefill" and n % 10 == 0:
            server_log.prefill(10, sum(ph.tokens or PREFILL_CYCLE[k % len(PREFILL_CYCLE)]
                                       for k in range(n - 10, n)))
        elif ph.phase == "decode":
            server_log.decode_step(accept_len=min(ph.nodes, 8) if ph.kind == "verify" else 1.0)
