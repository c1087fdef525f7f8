"""Labelled GPU workloads: ground truth for the phase classifier and the imbalance flag.

One host thread drives every visible GPU like the ranks of one tensor-parallel group: each
step every GPU runs its share, a small activation is all-reduced through GPU 0 (peer copies),
and the host waits for every GPU before the next step.  A GPU given more work (a hot expert
shard) therefore makes the others wait, as a straggler rank does at TP8.

Phases (``shared/DESIGN.md`` shapes, Kimi K2.6 per TP8 rank, scaled to fit a step in a few ms):

- ``idle``: nothing runs.
- ``prefill``: bf16 GEMMs over 2k-8k tokens x hidden 7168 and causal attention (flash SDPA,
  8 heads x 128) over the same tokens: compute-bound, tensor pipes busy.
- ``decode``: 8 tokens through a dense weight shard (7168 x 65536 bf16, 0.94 GB), routed
  experts as batched GEMMs (7168 -> 4096 gate/up, 2048 -> 7168 down; 88 MB per expert; 8 per
  GPU when balanced) and MLA-style attention of 4 draft tokens x 8 heads over a latent KV cache
  (batch 8 x 32k context x 576, V = first 512): memory-bound, DRAM busy, tensor pipes light.
- ``decode`` with ``hot_gpu=k``: GPU k runs ``hot_experts`` experts instead of 8.

Ground truth is written as it goes: one CSV row per phase, ``start,end,phase,hot_gpu`` in UTC
epoch seconds, stamped after the GPUs synchronised, so each boundary is exact to one step.

Requires torch with CUDA (the ``bench`` extra).
"""

from __future__ import annotations

import csv
import math
import time
from dataclasses import dataclass
from pathlib import Path

HIDDEN = 7168
EXPERT_WIDTH = 2048
KV_LATENT = 576
V_WIDTH = 512


@dataclass(frozen=True)
class Phase:
    """One stretch of the schedule: ``phase`` for ``seconds``, ``hot_gpu`` None when balanced."""

    phase: str
    seconds: float
    hot_gpu: int | None = None


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


class _Rank:
    """Buffers of one GPU (weights and caches are random bf16: zeros run faster)."""

    def __init__(self, torch, device, max_experts: int, seed: int) -> None:
        g = torch.Generator(device=device).manual_seed(seed)

        def rnd(*shape):
            return (torch.randn(*shape, device=device, dtype=torch.bfloat16, generator=g)
                    * 0.02)

        self.device = device
        self.w_prefill = rnd(HIDDEN, 16384)
        self.w_dense = rnd(HIDDEN, 65536)
        self.w_dense_out = rnd(65536 // 8, HIDDEN)
        self.w_gate_up = rnd(max_experts, HIDDEN, 2 * EXPERT_WIDTH)
        self.w_down = rnd(max_experts, EXPERT_WIDTH, HIDDEN)
        self.kv = rnd(8, 32768, KV_LATENT)
        self.x_decode = rnd(8, HIDDEN)
        self.q_verify = rnd(8, 4 * 8, KV_LATENT)
        self.x_prefill = rnd(8192, HIDDEN)
        self.qkv_prefill = rnd(3, 1, 8, 8192, 128)


class Workload:
    """Runs a schedule on the given CUDA devices and writes ground-truth intervals.

    Args:
        devices: CUDA device indices (default: all visible).
        hot_experts: experts run by the hot GPU per decode step (balanced GPUs run 8).
        seed: random seed for the buffers.

    Raises:
        RuntimeError: torch is missing or sees no CUDA device.
    """

    BALANCED_EXPERTS = 8

    def __init__(self, devices: list[int] | None = None, hot_experts: int = 48,
                 seed: int = 0) -> None:
        try:
            import torch
        except ImportError as exc:
            raise RuntimeError("the workload needs torch with CUDA: pip install -e '.[bench]' "
                               "from a clone") from exc
        if not torch.cuda.is_available():
            raise RuntimeError("the workload needs a CUDA GPU; torch sees none")
        if hot_experts < self.BALANCED_EXPERTS:
            raise RuntimeError(f"hot_experts must be at least {self.BALANCED_EXPERTS}")
        self.torch = torch
        self.devices = devices if devices is not None else list(range(torch.cuda.device_count()))
        self.hot_experts = hot_experts
        self.ranks = [_Rank(torch, torch.device("cuda", d), hot_experts, seed + d)
                      for d in self.devices]
        self.steps: dict[str, int] = {}

    # -- one step per phase ----------------------------------------------------------------
    def _prefill(self, r: _Rank, tokens: int):
        F = self.torch.nn.functional
        h = r.x_prefill[:tokens] @ r.w_prefill
        q, k, v = (t[:, :, :tokens] for t in r.qkv_prefill)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return h[:8, :HIDDEN] + a[0, 0, :8, :1]

    def _decode(self, r: _Rank, experts: int):
        torch = self.torch
        x = r.x_decode
        h = (x @ r.w_dense)[:, : 65536 // 8] @ r.w_dense_out
        xe = x.unsqueeze(0).expand(experts, -1, -1)
        gu = torch.bmm(xe, r.w_gate_up[:experts])
        act = torch.nn.functional.silu(gu[..., :EXPERT_WIDTH]) * gu[..., EXPERT_WIDTH:]
        h = h + torch.bmm(act, r.w_down[:experts]).sum(0)
        scores = torch.bmm(r.q_verify, r.kv.transpose(1, 2)) * (1.0 / math.sqrt(KV_LATENT))
        o = torch.bmm(torch.softmax(scores.float(), -1).to(torch.bfloat16), r.kv[..., :V_WIDTH])
        return h + o.mean(1).sum(-1, keepdim=True)

    def step(self, phase: Phase, i: int) -> None:
        """Run one synchronised step of ``phase`` on every GPU (step index ``i``)."""
        torch = self.torch
        outs = []
        for rank_i, r in enumerate(self.ranks):
            with torch.cuda.device(r.device):
                if phase.phase == "prefill":
                    outs.append(self._prefill(r, (2048, 4096, 8192)[i % 3]))
                else:
                    hot = phase.hot_gpu is not None and self.devices[rank_i] == phase.hot_gpu
                    outs.append(self._decode(r, self.hot_experts if hot
                                             else self.BALANCED_EXPERTS))
        # All-reduce through the first GPU, as TP ranks do after each layer.
        root = self.ranks[0].device
        total = sum(o.to(root, non_blocking=True) for o in outs)
        for r, o in zip(self.ranks, outs):
            o.copy_(total.to(r.device, non_blocking=True))
        for r in self.ranks:
            torch.cuda.synchronize(r.device)

    def run(self, schedule: list[Phase], labels_path: str | Path, log=print,
            server_log=None) -> list[dict]:
        """Run ``schedule``, writing one label row per phase to ``labels_path`` as it goes.

        ``server_log`` (a ``kernels_bench.sglang_log.SglangLogWriter``) also gets SGLang-style
        lines: a prefill batch line every 10 prefill steps, decode lines every 40 steps.

        Returns:
            The rows written (dicts with start, end, phase, hot_gpu, steps).
        """
        torch = self.torch
        # Warm up every kernel shape so compilation and cuBLAS heuristics stay out of phases.
        for ph in (Phase("prefill", 0), Phase("decode", 0), Phase("decode", 0, self.devices[0])):
            for i in range(3):
                self.step(ph, i)
        rows = []
        with Path(labels_path).open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["start", "end", "phase", "hot_gpu"])
            fh.flush()
            for ph in schedule:
                for r in self.ranks:
                    torch.cuda.synchronize(r.device)
                start = time.time()
                t_end = time.monotonic() + ph.seconds
                n = 0
                if ph.phase == "idle":
                    time.sleep(ph.seconds)
                else:
                    while time.monotonic() < t_end:
                        self.step(ph, n)
                        n += 1
                        if server_log is not None:
                            if ph.phase == "prefill" and n % 10 == 0:
                                server_log.prefill(10, sum((2048, 4096, 8192)[k % 3]
                                                           for k in range(n - 10, n)))
                            elif ph.phase == "decode":
                                server_log.decode_step()
                end = time.time()
                hot = "" if ph.hot_gpu is None else ph.hot_gpu
                w.writerow([f"{start:.6f}", f"{end:.6f}", ph.phase, hot])
                fh.flush()
                row = {"start": start, "end": end, "phase": ph.phase, "hot_gpu": ph.hot_gpu,
                       "steps": n}
                rows.append(row)
                rate = n / max(end - start, 1e-9)
                log(f"{ph.phase:8s} hot={hot!s:2s} {end - start:6.2f} s  {n:6d} steps  "
                    f"{1e3 / rate if n else float('nan'):7.2f} ms/step")
        return rows
