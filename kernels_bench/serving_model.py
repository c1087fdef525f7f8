"""The serving loop's models (``ARCHS``: MoE and dense shapes, random weights, experts as one
grouped GEMM) and their decode CUDA graphs (``DecodeGraphs``), for ``serving_loop``.
"""

from __future__ import annotations

import math
import random
import time

#: Model shapes: hidden, layers, query heads, KV heads, head dim, routed experts (0: dense),
#: experts per token, expert width, shared-expert width, dense MLP width.
ARCHS: dict[str, dict] = {
    "kimi_moe": {"hidden": 2048, "layers": 8, "heads": 16, "kv_heads": 1, "head_dim": 256,
                 "experts": 64, "top_k": 8, "expert_ff": 768, "shared_ff": 768, "dense_ff": 0},
    "qwen3_moe": {"hidden": 2048, "layers": 8, "heads": 32, "kv_heads": 4, "head_dim": 64,
                  "experts": 128, "top_k": 8, "expert_ff": 512, "shared_ff": 0, "dense_ff": 0},
    "mixtral": {"hidden": 4096, "layers": 6, "heads": 32, "kv_heads": 8, "head_dim": 128,
                "experts": 8, "top_k": 2, "expert_ff": 8192, "shared_ff": 0, "dense_ff": 0},
    "dense": {"hidden": 4096, "layers": 8, "heads": 32, "kv_heads": 8, "head_dim": 128,
              "experts": 0, "top_k": 0, "expert_ff": 0, "shared_ff": 0, "dense_ff": 14336},
}


#: The draft model of ``--tree``: two dense layers.
DRAFT = {"hidden": 1024, "layers": 2, "heads": 8, "kv_heads": 8, "head_dim": 128, "experts": 0,
         "top_k": 0, "expert_ff": 0, "shared_ff": 0, "dense_ff": 2816}


#: Shrinks a shape for a CPU run (``--tiny``).
TINY = {"hidden": 64, "layers": 2, "heads": 4, "head_dim": 16, "expert_ff": 32, "shared_ff": 32,
        "dense_ff": 96}


VOCAB = 32000


TINY_VOCAB = 512


#: Batch buckets of the decode graphs (SGLang's default capture list starts 1, 2, 4, 8, 16...).
BATCH_BUCKETS = (1, 2, 4, 8, 16)


#: Context buckets (tokens) of the decode graphs; a step uses the smallest that holds it.
CTX_BUCKETS = (2048, 8192, 16384, 40960)


TINY_CTX_BUCKETS = (256, 1024)


def model_shape(arch: str, tiny: bool) -> dict:
    """The shape of ``arch`` (``ARCHS`` or ``"draft"``), cut down to ``TINY`` for the CPU test."""
    s = dict(DRAFT if arch == "draft" else ARCHS[arch])
    if tiny:
        s.update({k: v for k, v in TINY.items() if s.get(k)})
        s["heads"] = max(s["heads"] // max(s["kv_heads"], 1), 1) * min(s["kv_heads"], 2)
        s["kv_heads"] = min(s["kv_heads"], 2)
        s["experts"] = min(s["experts"], 8)
        s["top_k"] = min(s["top_k"], 2)
    return s


class Model:
    """A decoder with a slot-indexed KV cache ``[layers, slots, max_ctx, kv_heads, head_dim]``.

    Running requests hold slots ``0..n-1`` (the scheduler keeps them packed), so a decode step of
    batch bucket B reads ``cache[:, :B, :C]`` as one strided view: no gather.

    Args:
        shape: an ``ARCHS`` entry.
        slots: most requests held at once.
        max_ctx: tokens per slot.
        device: "cuda" or "cpu"; dtype bf16 on CUDA, fp32 on the CPU.
        seed: weights' seed.
        vocab: vocabulary size (the LM head's width).
    """

    def __init__(self, shape: dict, slots: int, max_ctx: int, device: str, seed: int,
                 vocab: int) -> None:
        import torch

        self.torch = torch
        self.s = shape
        self.device = device
        self.dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
        self.vocab = vocab
        g = torch.Generator(device=device).manual_seed(seed)
        h, nh, kvh, hd = shape["hidden"], shape["heads"], shape["kv_heads"], shape["head_dim"]

        def w(*dims: int) -> torch.Tensor:
            return (torch.randn(*dims, generator=g, device=device, dtype=torch.float32)
                    * (1.0 / math.sqrt(dims[-2] if len(dims) > 1 else dims[-1]))
                    ).to(self.dtype)

        self.embed = w(vocab, h)
        self.lm_head = w(h, vocab)
        self.layers = []
        for _ in range(shape["layers"]):
            layer = {"qkv": w(h, (nh + 2 * kvh) * hd), "o": w(nh * hd, h)}
            if shape["experts"]:
                e, ff = shape["experts"], shape["expert_ff"]
                layer["router"] = w(h, e)
                layer["w13"] = w(e, h, 2 * ff)
                layer["w2"] = w(e, ff, h)
                if shape["shared_ff"]:
                    layer["s13"] = w(h, 2 * shape["shared_ff"])
                    layer["s2"] = w(shape["shared_ff"], h)
            else:
                layer["s13"] = w(h, 2 * shape["dense_ff"])
                layer["s2"] = w(shape["dense_ff"], h)
            self.layers.append(layer)
        self.k_cache = torch.zeros(shape["layers"], slots, max_ctx, kvh, hd, device=device,
                                   dtype=self.dtype)
        self.v_cache = torch.zeros_like(self.k_cache)
        self.grouped = device.startswith("cuda") and hasattr(torch, "_grouped_mm")

    # -- layers ------------------------------------------------------------------------------
    def _mlp(self, x, w13, w2):
        a = x @ w13
        ff = a.shape[-1] // 2
        return (self.torch.nn.functional.silu(a[:, :ff]) * a[:, ff:]) @ w2

    def _moe(self, x, layer):
        """Top-k routed experts as one grouped GEMM over tokens sorted by expert."""
        torch = self.torch
        e, k = self.s["experts"], self.s["top_k"]
        probs = torch.softmax((x @ layer["router"]).float(), dim=-1)
        wts, idx = torch.topk(probs, k, dim=-1)
        flat = idx.reshape(-1)
        order = torch.argsort(flat)
        tok = order // k
        xs = x.index_select(0, tok)
        if self.grouped:
            counts = torch.zeros(e, dtype=torch.int64, device=x.device)
            counts.scatter_add_(0, flat, torch.ones_like(flat))  # graph-safe, unlike bincount
            offs = torch.cumsum(counts, 0).to(torch.int32)
            a = torch._grouped_mm(xs, layer["w13"], offs=offs)
            ff = a.shape[-1] // 2
            a = torch.nn.functional.silu(a[:, :ff]) * a[:, ff:]
            y = torch._grouped_mm(a, layer["w2"], offs=offs)
        else:  # the CPU: a loop over experts
            sorted_e = flat.index_select(0, order)
            y = torch.empty_like(xs)
            for j in range(e):
                m = sorted_e == j
                if bool(m.any()):
                    y[m] = self._mlp(xs[m], layer["w13"][j], layer["w2"][j])
        y = y * wts.reshape(-1).index_select(0, order).to(y.dtype)[:, None]
        out = torch.zeros_like(x).index_add_(0, tok, y)
        if "s13" in layer:
            out = out + self._mlp(x, layer["s13"], layer["s2"])
        return out

    def _attn_decode(self, q, li, n_b, c, mask):
        """Queries of ``n_b`` requests, ``t`` tokens each, against ``cache[:, :n_b, :c]``.

        ``q`` is ``[n_b * t, heads * head_dim]``; the query heads of one KV head ride as extra
        query rows (grouped-query attention without copying K or V)."""
        torch = self.torch
        nh, kvh, hd = self.s["heads"], self.s["kv_heads"], self.s["head_dim"]
        g = nh // kvh
        t = q.shape[0] // n_b
        qh = q.view(n_b, t, kvh, g, hd).permute(0, 2, 3, 1, 4).reshape(n_b, kvh, g * t, hd)
        k = self.k_cache[li, :n_b, :c].permute(0, 2, 1, 3)
        v = self.v_cache[li, :n_b, :c].permute(0, 2, 1, 3)
        o = torch.nn.functional.scaled_dot_product_attention(qh, k, v, attn_mask=mask)
        return o.view(n_b, kvh, g, t, hd).permute(0, 3, 1, 2, 4).reshape(n_b * t, nh * hd)

    def _attn_prefill(self, q, li, slot, p0, n):
        """A prefill chunk of ``n`` tokens at positions ``p0..p0+n-1`` of ``slot``, causal
        against everything before it (``causal_lower_right``: flash attention's kernel)."""
        torch = self.torch
        from torch.nn.attention.bias import causal_lower_right

        nh, kvh, hd = self.s["heads"], self.s["kv_heads"], self.s["head_dim"]
        qh = q.view(1, n, nh, hd).transpose(1, 2)
        k = self.k_cache[li, slot, :p0 + n].transpose(0, 1).unsqueeze(0)
        v = self.v_cache[li, slot, :p0 + n].transpose(0, 1).unsqueeze(0)
        if kvh != nh:
            k = k.repeat_interleave(nh // kvh, dim=1)
            v = v.repeat_interleave(nh // kvh, dim=1)
        o = torch.nn.functional.scaled_dot_product_attention(
            qh, k, v, attn_mask=causal_lower_right(n, p0 + n))
        return o.transpose(1, 2).reshape(n, nh * hd)

    def forward(self, ids, dec: dict | None, pre: list[tuple[int, int, int]]):
        """One step over packed tokens: first the decode rows, then each prefill chunk.

        Args:
            ids: ``[n_tokens]`` token ids.
            dec: the decode part or None: ``n_b`` requests in slots ``0..n_b-1``, ``t`` tokens
                each, context bucket ``c``, ``mask`` ``[n_b, 1, g*t, c]`` bool, ``slot_idx`` /
                ``pos_idx`` ``[n_b*t]`` where each token's K and V go.
            pre: prefill chunks ``(slot, start position, tokens)``.

        Returns:
            ``[rows, vocab]`` logits: one row per decode token, the last token of each chunk.
        """
        torch = self.torch
        nh, kvh, hd = self.s["heads"], self.s["kv_heads"], self.s["head_dim"]
        x = self.embed.index_select(0, ids)
        n_dec = dec["n_b"] * dec["t"] if dec else 0
        if pre:
            pre_slot = torch.cat([torch.full((n,), s, dtype=torch.long) for s, _, n in pre])
            pre_pos = torch.cat([torch.arange(p0, p0 + n) for _, p0, n in pre])
            pre_slot, pre_pos = pre_slot.to(ids.device), pre_pos.to(ids.device)
        for li, layer in enumerate(self.layers):
            qkv = x @ layer["qkv"]
            q = qkv[:, :nh * hd]
            k = qkv[:, nh * hd:(nh + kvh) * hd].view(-1, kvh, hd)
            v = qkv[:, (nh + kvh) * hd:].view(-1, kvh, hd)
            parts = []
            if dec:
                self.k_cache[li].index_put_((dec["slot_idx"], dec["pos_idx"]), k[:n_dec])
                self.v_cache[li].index_put_((dec["slot_idx"], dec["pos_idx"]), v[:n_dec])
                parts.append(self._attn_decode(q[:n_dec], li, dec["n_b"], dec["c"],
                                               dec["mask"]))
            if pre:
                self.k_cache[li].index_put_((pre_slot, pre_pos), k[n_dec:])
                self.v_cache[li].index_put_((pre_slot, pre_pos), v[n_dec:])
                row = n_dec
                for slot, p0, n in pre:
                    parts.append(self._attn_prefill(q[row:row + n], li, slot, p0, n))
                    row += n
            a = torch.cat(parts) if len(parts) > 1 else parts[0]
            x = x + a @ layer["o"]
            x = x + (self._moe(x, layer) if self.s["experts"] else
                     self._mlp(x, layer["s13"], layer["s2"]))
        last = []
        if n_dec:
            last.append(torch.arange(n_dec, device=ids.device))
        row = n_dec
        for _, _, n in pre:
            row += n
            last.append(torch.tensor([row - 1], device=ids.device))
        sel = torch.cat(last) if len(last) > 1 else last[0]
        return x.index_select(0, sel) @ self.lm_head

    def swap_slots(self, a: int, len_a: int, b: int, len_b: int) -> None:
        """Exchange the cached tokens of slots ``a`` (``len_a`` of them) and ``b``."""
        keep = [c[:, b, :len_b].clone() for c in (self.k_cache, self.v_cache)]
        self.move_slot(a, b, len_a)
        if len_b:
            self.k_cache[:, a, :len_b] = keep[0]
            self.v_cache[:, a, :len_b] = keep[1]

    def move_slot(self, src: int, dst: int, length: int) -> None:
        """Copy ``length`` cached tokens of slot ``src`` into ``dst`` (keeps slots packed)."""
        if src != dst and length > 0:
            self.k_cache[:, dst, :length] = self.k_cache[:, src, :length]
            self.v_cache[:, dst, :length] = self.v_cache[:, src, :length]


def tree_ancestors(t: int, rng: random.Random):
    """``[t, t]`` bool: node i sees node j when j is i or an ancestor of i, for a random tree
    whose node i > 0 hangs under a node before it (a draft tree in topological order)."""
    import torch

    anc = torch.eye(t, dtype=torch.bool)
    for i in range(1, t):
        parent = rng.randrange(max(0, i - 4), i)  # bushy near the root, deep further down
        anc[i] |= anc[parent]
    return anc


class DecodeGraphs:
    """Decode (and verify) steps replayed from CUDA graphs, captured per (batch bucket, tokens
    per request, context bucket) with one shared memory pool; eager on the CPU.

    Static inputs per graph: ``ids`` ``[B*t]``, ``lens`` ``[B]`` (tokens cached before the
    step), ``anc`` ``[t, t]`` (the tree's ancestor mask; ``[[True]]`` for plain decode).  The
    mask and the K/V write positions are computed inside the graph from them.
    """

    def __init__(self, model: Model, ctx_buckets: tuple[int, ...], use_graphs: bool) -> None:
        self.m = model
        self.ctx = ctx_buckets
        self.use_graphs = use_graphs
        self.graphs: dict[tuple[int, int, int], tuple] = {}
        self.pool = None
        self.capture_s = 0.0

    def _inputs(self, b: int, t: int, c: int):
        torch = self.m.torch
        dev = self.m.device
        return {"ids": torch.zeros(b * t, dtype=torch.long, device=dev),
                "lens": torch.zeros(b, dtype=torch.long, device=dev),
                "anc": torch.ones(t, t, dtype=torch.bool, device=dev), "b": b, "t": t, "c": c}

    def _run(self, st):
        torch = self.m.torch
        b, t, c = st["b"], st["t"], st["c"]
        g = self.m.s["heads"] // self.m.s["kv_heads"]
        pos = torch.arange(c, device=st["lens"].device)
        rel = pos[None, :] - st["lens"][:, None]                       # [B, C]
        in_tree = (rel >= 0) & (rel < t)
        anc = st["anc"][:, rel.clamp(0, t - 1)].permute(1, 0, 2)       # [B, t, C]
        mask = (rel < 0)[:, None, :] | (in_tree[:, None, :] & anc)
        mask = mask.repeat(1, g, 1).unsqueeze(1)                       # [B, 1, g*t, C]
        slot_idx = torch.arange(b, device=pos.device).repeat_interleave(t)
        pos_idx = (st["lens"][:, None] + torch.arange(t, device=pos.device)[None, :]).reshape(-1)
        dec = {"n_b": b, "t": t, "c": c, "mask": mask, "slot_idx": slot_idx,
               "pos_idx": pos_idx.clamp(max=self.m.k_cache.shape[2] - 1)}
        return self.m.forward(st["ids"], dec, [])

    def capture(self, t: int) -> int:
        """Capture every (batch, context) bucket for ``t`` tokens per request; returns how many
        graphs were captured (0 on the CPU)."""
        if not self.use_graphs:
            return 0
        torch = self.m.torch
        t0 = time.perf_counter()
        n = 0
        for c in self.ctx:
            for b in BATCH_BUCKETS:
                st = self._inputs(b, t, c)
                s = torch.cuda.Stream()
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):
                    for _ in range(2):
                        self._run(st)
                torch.cuda.current_stream().wait_stream(s)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph, pool=self.pool):
                    out = self._run(st)
                if self.pool is None:
                    self.pool = graph.pool()
                self.graphs[(b, t, c)] = (graph, st, out)
                n += 1
        torch.cuda.synchronize()
        self.capture_s += time.perf_counter() - t0
        return n

    def step(self, lens: list[int], t: int, anc=None):
        """One step of ``len(lens)`` requests (slots ``0..n-1``), ``t`` tokens each."""
        torch = self.m.torch
        n = len(lens)
        b = next(x for x in BATCH_BUCKETS if x >= n)
        need = max(lens) + t
        c = next(x for x in self.ctx if x >= need)
        lens_t = torch.tensor(lens + [0] * (b - n), dtype=torch.long)
        if (b, t, c) in self.graphs:
            graph, st, out = self.graphs[(b, t, c)]
            st["lens"].copy_(lens_t, non_blocking=True)
            if anc is not None:
                st["anc"].copy_(anc, non_blocking=True)
            graph.replay()
            return out
        st = self._inputs(b, t, c)
        st["lens"].copy_(lens_t)
        if anc is not None:
            st["anc"].copy_(anc)
        return self._run(st)
