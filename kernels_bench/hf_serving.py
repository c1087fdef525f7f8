"""Labelled traces from a serving engine not written here: transformers' continuous batching
(``init_continuous_batching`` -> ``add_request`` / ``get_result``) and its speculative decoding
(``generate(..., assistant_model=draft)``), serving a stream of requests on architectures the
corpus has not seen, with random weights built from a config.

Architectures (``ARCHS``): DeepSeek-V3 (MLA attention, one shared + 64 routed experts, top-8:
Kimi K2's architecture, scaled down; values as wide as keys, 192, since transformers' paged
cache stores MLA's keys and values expanded per head in one width), GPT-OSS (32 experts top-4, sliding-window layers),
GLM-4-MoE, Qwen3-MoE, and a dense Llama as a control.

Serving patterns (``--pattern``): ``poisson`` arrivals at a rate that changes every few seconds
(0 to ~12 requests/s, so the engine packs from one to dozens of sequences), ``bursty`` (bursts
of 1-48 requests, gaps from 0.1 s, shorter than a window, to 4 s); prompts short (50-500
tokens) or long (8k-32k, chunked by the engine into forwards of ``max_batch_tokens``); greedy
or sampled.  ``--spec`` serves sequential ``generate()`` calls with a small draft model of the
same vocabulary instead (assisted generation: the target verifies k+1 draft tokens a forward).

Ground truth comes from the engine itself, not this project's schedule: every forward the engine
runs is stamped between two device synchronisations and its packed query lengths
(``cu_seq_lens_q``) say how many tokens were prefill (a sequence with more than one query token)
and how many decode (one token).  Under ``--spec`` a forward that starts at cache position 0 is
the prompt's prefill; later ones (the target's verify of k+1 tokens, the draft's steps) are
decode (a verify forward counts as decode: ``docs/measurement.md``, "Terms").  A forward's phase
is the one holding most of its tokens; consecutive forwards of one phase merge into an interval,
and gaps of more than ``idle_gap_s`` between forwards are ``idle``.  Written: a label CSV
``start,end,phase,hot_gpu,workload`` and, beside it, ``*.forwards.csv`` (one row per forward:
start, end, prefill_tokens, decode_tokens, sequences), so a window holding both can be scored by
its shares.

Requires torch with CUDA and transformers >= 5.17 (present on the H200 image; not a dependency
of tealeaves).  ``python -m tealeaves.kernels_bench.hf_serving --help``.
"""

from __future__ import annotations

import argparse
import csv
import math
import random
import threading
import time
from pathlib import Path

#: Scaled configurations (bf16, about 1-3 B parameters each: they fit one H200 with room for
#: the paged KV cache of 32k-token prompts).
ARCHS: dict[str, tuple[str, str, dict]] = {
    "deepseek_v3": ("DeepseekV3Config", "DeepseekV3ForCausalLM", {
        "vocab_size": 16384, "hidden_size": 2048, "intermediate_size": 6144,
        "moe_intermediate_size": 768, "num_hidden_layers": 10, "first_k_dense_replace": 1,
        "n_routed_experts": 64, "num_experts_per_tok": 8, "n_shared_experts": 1, "n_group": 8,
        "topk_group": 4, "num_attention_heads": 16, "num_key_value_heads": 16,
        "kv_lora_rank": 512, "q_lora_rank": 768, "qk_rope_head_dim": 64,
        "qk_nope_head_dim": 128, "v_head_dim": 192, "max_position_embeddings": 40960}),
    "gpt_oss": ("GptOssConfig", "GptOssForCausalLM", {
        "vocab_size": 16384, "hidden_size": 2048, "intermediate_size": 2048,
        "num_hidden_layers": 10, "num_local_experts": 32, "num_experts_per_tok": 4,
        "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 64,
        "sliding_window": 128, "max_position_embeddings": 40960}),
    "glm4_moe": ("Glm4MoeConfig", "Glm4MoeForCausalLM", {
        "vocab_size": 16384, "hidden_size": 2048, "intermediate_size": 6144,
        "moe_intermediate_size": 768, "num_hidden_layers": 10, "first_k_dense_replace": 1,
        "n_routed_experts": 64, "num_experts_per_tok": 8, "n_shared_experts": 1,
        "num_attention_heads": 16, "num_key_value_heads": 4, "head_dim": 128,
        "max_position_embeddings": 40960}),
    "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM", {
        "vocab_size": 16384, "hidden_size": 2048, "intermediate_size": 6144,
        "moe_intermediate_size": 768, "num_hidden_layers": 10, "num_experts": 64,
        "num_experts_per_tok": 8, "num_attention_heads": 16, "num_key_value_heads": 4,
        "head_dim": 128, "max_position_embeddings": 40960}),
    "llama": ("LlamaConfig", "LlamaForCausalLM", {
        "vocab_size": 16384, "hidden_size": 2048, "intermediate_size": 8192,
        "num_hidden_layers": 12, "num_attention_heads": 16, "num_key_value_heads": 8,
        "max_position_embeddings": 40960}),
}
#: The draft model of ``--spec``: a two-layer Llama of the same vocabulary.
DRAFT = ("LlamaConfig", "LlamaForCausalLM", {
    "vocab_size": 16384, "hidden_size": 1024, "intermediate_size": 2816, "num_hidden_layers": 2,
    "num_attention_heads": 8, "num_key_value_heads": 8, "max_position_embeddings": 40960})
#: Shrinks every configuration for a CPU smoke run (``--tiny``).
TINY = {"vocab_size": 512, "hidden_size": 64, "intermediate_size": 128,
        "moe_intermediate_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 16, "kv_lora_rank": 32, "q_lora_rank": 48,
        "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 16,
        "n_routed_experts": 8, "num_local_experts": 8, "num_experts": 8,
        "num_experts_per_tok": 2, "n_group": 2, "topk_group": 1, "max_position_embeddings": 4096}


def build(spec: tuple[str, str, dict], device: str, seed: int, tiny: bool = False):
    """A model with random weights from a config (bf16 on CUDA, fp32 on the CPU); ``device``
    "auto" splits its layers over every visible GPU (``hf_moe.split_layers``: a pipeline, the
    GPUs take turns)."""
    import torch
    import transformers

    cfg_name, model_name, kwargs = spec
    cfg_cls = getattr(transformers, cfg_name)
    kwargs = dict(kwargs)
    if tiny:
        kwargs.update({k: v for k, v in TINY.items() if k in kwargs})
    if "kv_lora_rank" in kwargs:
        # transformers' paged cache stores MLA's keys and values expanded per head, in one
        # width: one KV head per query head, values as wide as keys (nope + rope)
        # (the cache's width is patched in by ``mla_paged_cache``)
        kwargs["num_key_value_heads"] = kwargs["num_attention_heads"]
        kwargs["v_head_dim"] = kwargs["qk_nope_head_dim"] + kwargs["qk_rope_head_dim"]
    torch.manual_seed(seed)
    cfg = cfg_cls(**kwargs)
    dtype = torch.float32 if device == "cpu" else torch.bfloat16
    with torch.device("cuda:0" if device == "auto" else device):
        model = getattr(transformers, model_name)(cfg).to(dtype)
    if device == "auto":
        from tealeaves.kernels_bench.hf_moe import split_layers

        model = split_layers(model)
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    return model.eval()


def mla_paged_cache() -> None:
    """Let transformers' paged cache hold MLA models: its width comes from ``config.head_dim``,
    which DeepSeek-V3's config sets to the rope width; the expanded keys are
    ``qk_nope_head_dim + qk_rope_head_dim`` wide."""
    from transformers.generation.continuous_batching import cache

    if getattr(cache.find_head_dim, "_mla", False):
        return
    orig = cache.find_head_dim

    def find_head_dim(config):
        qk = getattr(config, "qk_head_dim", None)
        return qk if getattr(config, "kv_lora_rank", None) and qk else orig(config)

    find_head_dim._mla = True
    cache.find_head_dim = find_head_dim


def _past_length(kwargs: dict) -> int:
    """Tokens already in the cache when a ``generate()`` forward starts."""
    pos = kwargs.get("cache_position")
    if pos is not None and len(pos):
        return int(pos[0])
    pkv = kwargs.get("past_key_values")
    if pkv is not None and hasattr(pkv, "get_seq_length"):
        return int(pkv.get_seq_length())
    ids = kwargs.get("position_ids")
    return int(ids.reshape(-1)[0]) if ids is not None and ids.numel() else 0


class ForwardLog:
    """Every forward of the engine: wall-clock start/end between device synchronisations and
    its prefill/decode token counts.  Thread-safe (the engine runs forwards in its own thread).

    Args:
        sync: waits for the device (``torch.cuda.synchronize``), so stamps bound the work.
    """

    def __init__(self, sync) -> None:
        self.sync = sync
        self.rows: list[tuple[float, float, int, int, int]] = []
        self._lock = threading.Lock()

    def add(self, t0: float, t1: float, prefill: int, decode: int, seqs: int) -> None:
        with self._lock:
            self.rows.append((t0, t1, prefill, decode, seqs))

    def clear(self) -> None:
        """Forget every forward logged so far (the warm-up's)."""
        with self._lock:
            self.rows.clear()

    def wrap_cb(self):
        """Patch transformers' continuous-batching ``ModelRunner.compute_batch`` so every
        packed forward is logged from its ``cu_seq_lens_q``.  Returns an undo callable."""
        from transformers.generation.continuous_batching import model_runner

        orig = model_runner.ModelRunner.compute_batch
        log = self

        def compute_batch(runner, model, batch_data):
            cu = batch_data["cu_seq_lens_q"]
            lens = (cu[1:] - cu[:-1]).tolist()
            prefill = sum(n for n in lens if n > 1)
            decode = sum(1 for n in lens if n == 1)
            log.sync()
            t0 = time.time()
            out = orig(runner, model, batch_data)
            log.sync()
            log.add(t0, time.time(), prefill, decode, sum(1 for n in lens if n > 0))
            return out

        model_runner.ModelRunner.compute_batch = compute_batch
        return lambda: setattr(model_runner.ModelRunner, "compute_batch", orig)

    def hook_generate(self, model) -> None:
        """Forward hooks for ``generate()``: a forward at cache position 0 is prefill, later
        ones (verify, draft steps, plain decode) decode."""
        state = {}

        def pre(module, args, kwargs):
            ids = kwargs.get("input_ids", args[0] if args else None)
            first = _past_length(kwargs) == 0
            n = int(ids.shape[0] * ids.shape[1])
            state["n"] = (n, 0) if first else (0, int(ids.shape[0]))
            state["b"] = int(ids.shape[0])
            self.sync()
            state["t0"] = time.time()

        def post(module, args, kwargs, output):
            self.sync()
            self.add(state["t0"], time.time(), *state["n"], state["b"])

        model.register_forward_pre_hook(pre, with_kwargs=True)
        model.register_forward_hook(post, with_kwargs=True)


def intervals(rows, idle_gap_s: float = 0.05, t_begin: float | None = None,
              t_end: float | None = None, what: str = "") -> list[list]:
    """Label intervals ``[start, end, phase, workload]`` from forward rows.

    A forward is ``prefill`` when its prefill tokens are at least its decode tokens, else
    ``decode``; neighbours of one phase closer than ``idle_gap_s`` merge (the host time between
    them goes to that phase), a gap of ``idle_gap_s`` or more is ``idle``, and a gap between
    two phases closer than that is split at its middle.
    """
    rows = sorted(rows)
    out: list[list] = []
    cursor = t_begin if t_begin is not None else (rows[0][0] if rows else 0.0)
    for t0, t1, p, d, _ in rows:
        phase = "prefill" if p >= d and p > 0 else "decode"
        if out and t0 - out[-1][1] < idle_gap_s:
            if out[-1][2] == phase:
                out[-1][1] = t1
                continue
            mid = (out[-1][1] + t0) / 2.0
            out[-1][1] = mid
            out.append([mid, t1, phase, what])
            continue
        if t0 > cursor and (not out or out[-1][1] < t0):
            out.append([out[-1][1] if out else cursor, t0, "idle", "idle"])
        out.append([t0, t1, phase, what])
    if t_end is not None and out and t_end > out[-1][1]:
        out.append([out[-1][1], t_end, "idle", "idle"])
    return [r for r in out if r[1] > r[0]]


def _prompt_len(rng: random.Random, long_share: float, tiny: bool) -> int:
    if rng.random() < long_share:
        n = rng.randint(8192, 32768)
    else:
        n = rng.randint(50, 500)
    return max(4, n // 64) if tiny else n


def poisson_arrivals(t: float, seconds: float, rng: random.Random,
                     rates: tuple[float, ...]) -> list[tuple[float, int]]:
    """Single arrivals (s from the start) from ``t`` to ``seconds``, Poisson at a rate
    (requests/s) drawn from ``rates`` anew every 3-8 s (0: nothing arrives then)."""
    out: list[tuple[float, int]] = []
    rate_until, rate = 0.0, 0.0
    while t < seconds:
        if t >= rate_until:  # the offered load changes every 3-8 s, sometimes to nothing
            rate = rng.choice(list(rates))
            rate_until = t + rng.uniform(3.0, 8.0)
        if rate == 0.0:
            t = rate_until
            continue
        t += rng.expovariate(rate)
        if t < min(rate_until, seconds):
            out.append((t, 1))
    return out


def arrivals(pattern: str, seconds: float, rng: random.Random):
    """Request arrival offsets (s from the start) and burst sizes: ``[(t, n_requests)]``."""
    out, t = [], rng.uniform(0.5, 2.0)
    if pattern == "poisson":
        out = poisson_arrivals(t, seconds, rng, (0.0, 0.5, 2.0, 6.0, 12.0))
    else:
        while t < seconds:
            out.append((t, rng.choice([1, 2, 4, 8, 16, 32, 48])))
            t += rng.choice([0.1, 0.2, 0.35, 1.0, 2.0, 4.0]) + rng.uniform(0, 0.5)
    return out


def cb_manager(model, sampling: bool, max_batch_tokens: int):
    """A started continuous-batching manager (greedy or sampled, ``max_batch_tokens`` per
    packed forward)."""
    from transformers import GenerationConfig
    from transformers.generation.configuration_utils import ContinuousBatchingConfig

    extra = {"temperature": 0.8, "top_k": 50} if sampling else {}
    gc = GenerationConfig(max_new_tokens=256, do_sample=sampling, eos_token_id=-1,
                          pad_token_id=0, **extra)
    cbc = ContinuousBatchingConfig(max_batch_tokens=max_batch_tokens)
    manager = model.init_continuous_batching(generation_config=gc,
                                             continuous_batching_config=cbc)
    manager.start()
    return manager


def serve_cb(manager, vocab: int, seconds: float, pattern: str, rng: random.Random,
             long_share: float, tiny: bool, log=print) -> int:
    """Feed arrivals to a started continuous-batching manager for ``seconds`` and wait for
    their results; returns the requests served."""
    t0 = time.monotonic()
    sent = served = 0
    for at, n in arrivals(pattern, seconds, rng):
        while time.monotonic() < t0 + at:
            if manager.get_result(timeout=min(0.05, t0 + at - time.monotonic()) or 1e-3):
                served += 1
        for _ in range(n):
            p = _prompt_len(rng, long_share, tiny)
            new = rng.choice([16, 32, 64, 128, 256]) if not tiny else rng.choice([4, 8])
            manager.add_request([rng.randrange(1, vocab) for _ in range(p)],
                                max_new_tokens=new)
            sent += 1
    while served < sent and time.monotonic() < t0 + seconds + 15:
        if manager.get_result(timeout=0.2):
            served += 1
    log(f"continuous batching: {sent} requests sent, {served} served")
    return served


def serve_spec(model, draft, seconds: float, rng: random.Random, sampling: bool,
               long_share: float, tiny: bool, device: str, log=print) -> int:
    """Sequential ``generate(assistant_model=draft)`` requests with idle gaps."""
    import torch

    vocab = model.config.vocab_size
    t_end = time.monotonic() + seconds
    served = 0
    while time.monotonic() < t_end:
        time.sleep(rng.choice([0.15, 0.3, 1.0, 2.5]))
        b = 1  # assisted generation serves one sequence at a time
        p = _prompt_len(rng, long_share, tiny)
        n = rng.choice([64, 128, 256]) if not tiny else 8
        ids = torch.randint(1, vocab, (b, p), device=device)
        with torch.inference_mode():
            model.generate(ids, attention_mask=torch.ones_like(ids), assistant_model=draft,
                           max_new_tokens=n, min_new_tokens=n, do_sample=sampling,
                           num_assistant_tokens=rng.choice([4, 8]))
        served += 1
    log(f"assisted generation: {served} requests served")
    return served


def run(labels_path: str | Path, arch: str, pattern: str = "poisson", seconds: float = 45.0,
        seed: int = 0, device: str = "cuda:0", spec: bool = False, sampling: bool = False,
        long_share: float = 0.15, max_batch_tokens: int = 8192, tiny: bool = False,
        log=print) -> list[list]:
    """Serve for about ``seconds`` and write the labels and the forwards CSV.

    Returns:
        The label rows ``[start, end, phase, workload]``.
    """
    import torch

    rng = random.Random(seed)
    if device == "cpu":
        def sync() -> None:
            return None
    else:
        def sync() -> None:  # every GPU: a split model's forward ends on the last one
            for i in range(torch.cuda.device_count()):
                torch.cuda.synchronize(i)
    model = build(ARCHS[arch], device, seed, tiny)
    mla_paged_cache()
    device = "cuda:0" if device == "auto" else device  # inputs go to the first GPU
    draft = build(DRAFT, device, seed + 1, tiny) if spec else None
    fl = ForwardLog(sync)
    what = (f"hf {arch} {'assisted generate' if spec else 'continuous batching ' + pattern}"
            f"{' sampled' if sampling else ' greedy'}")
    # warm up: one short and one long request, before the log starts
    warm = random.Random(seed + 99)
    if spec:
        serve_spec(model, draft, 0.01, warm, sampling, 0.0, tiny, device, log=lambda s: None)
        fl.hook_generate(model)
        fl.hook_generate(draft)
    else:
        undo = fl.wrap_cb()
        manager = cb_manager(model, sampling, max_batch_tokens)
        # the engine builds its cache and graphs on the first requests: a short and a long
        # one, answered, before the clock starts
        vocab = model.config.vocab_size
        for p in (64, 512 if tiny else 16384):
            manager.add_request([warm.randrange(1, vocab) for _ in range(p)], max_new_tokens=8)
        for _ in range(2):
            if manager.get_result(timeout=300) is None:
                raise RuntimeError("the continuous-batching engine answered no warm-up request")
        fl.clear()
    sync()
    t_begin = time.time()
    if spec:
        n = serve_spec(model, draft, seconds, rng, sampling, long_share, tiny, device, log)
    else:
        n = serve_cb(manager, model.config.vocab_size, seconds, pattern, rng, long_share,
                     tiny, log)
        manager.stop(block=True, timeout=10, hard_stop=True)  # an overloaded engine's backlog
        undo()
    t_end = time.time()
    rows = intervals(fl.rows, t_begin=t_begin, t_end=t_end, what=what)
    labels_path = Path(labels_path)
    with labels_path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["start", "end", "phase", "hot_gpu", "workload"])
        for s, e, ph, wk in rows:
            w.writerow([f"{s:.6f}", f"{e:.6f}", ph, "", wk])
    fpath = labels_path.with_name(labels_path.name.replace(".labels.csv", "") +
                                  ".forwards.csv")
    with fpath.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["start", "end", "prefill_tokens", "decode_tokens", "sequences"])
        for t0, t1, p, d, s in sorted(fl.rows):
            w.writerow([f"{t0:.6f}", f"{t1:.6f}", p, d, s])
    fw = sorted(fl.rows)
    share = {ph: sum(r[1] - r[0] for r in rows if r[2] == ph) for ph in
             ("idle", "prefill", "decode")}
    span = max(t_end - t_begin, 1e-9)
    log(f"{what}: {n} requests, {len(fw)} forwards, "
        + ", ".join(f"{ph} {v / span:.0%}" for ph, v in share.items())
        + f"; {sum(1 for r in fw if r[2] and r[3])} forwards mixed prefill+decode"
        + (f"; median forward {sorted(r[1] - r[0] for r in fw)[len(fw) // 2] * 1e3:.1f} ms"
           if fw else ""))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tealeaves.kernels_bench.hf_serving",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--labels", type=Path, required=True, help="label CSV to write")
    ap.add_argument("--arch", choices=sorted(ARCHS), default="deepseek_v3")
    ap.add_argument("--pattern", choices=("poisson", "bursty"), default="poisson")
    ap.add_argument("--spec", action="store_true",
                    help="assisted generation with a draft model instead of continuous batching")
    ap.add_argument("--sampling", action="store_true", help="sample (default greedy)")
    ap.add_argument("--seconds", type=float, default=45.0)
    ap.add_argument("--long-share", type=float, default=0.15,
                    help="share of requests with 8k-32k-token prompts")
    ap.add_argument("--max-batch-tokens", type=int, default=8192)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cuda:0",
                    help="cuda:N, cpu, or auto (layers split over every visible GPU)")
    ap.add_argument("--tiny", action="store_true", help="tiny configs (CPU smoke run)")
    a = ap.parse_args(argv)
    if not (math.isfinite(a.seconds) and a.seconds > 0):
        ap.error("--seconds must be a positive number")
    run(a.labels, a.arch, a.pattern, a.seconds, a.seed, a.device, a.spec, a.sampling,
        a.long_share, a.max_batch_tokens, a.tiny, log=lambda s: print(s, flush=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
