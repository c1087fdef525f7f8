"""A labelled trace of model code not written here: a HuggingFace transformers MoE model
built from a config with random weights, serving a stream of ``generate()`` requests: the
Mixtral architecture (8 experts, top-2 routing, grouped-query attention) or Qwen2-MoE (60
fine-grained experts, top-4, a shared expert), on one GPU or split layer-wise over several
(``--device-map auto``, accelerate's pipeline placement: the GPUs take turns).

Ground truth comes from forward hooks on the model, not from this project's own schedule:
each forward call is timed between two device synchronisations, and a call whose input holds
more than one position per sequence is ``prefill`` (the prompt pass), one position ``decode``
(a generated token).  Consecutive calls of one phase merge into one interval; the gaps
between requests are ``idle``.  Written to a label CSV ``start,end,phase,hot_gpu,workload``
(hot_gpu empty: one GPU).

Requires torch with CUDA and transformers (present on the H200 image; not a dependency of
tealeaves).  ``python -m tealeaves.kernels_bench.hf_moe --help``.
"""

from __future__ import annotations

import argparse
import csv
import random
import time
from pathlib import Path

#: Model shape: a scaled Mixtral (1.6 B parameters, 0.5 B active per token), bf16.
CONFIG = {"vocab_size": 8192, "hidden_size": 2048, "intermediate_size": 4096,
          "num_hidden_layers": 8, "num_attention_heads": 16, "num_key_value_heads": 8,
          "num_local_experts": 8, "num_experts_per_tok": 2, "max_position_embeddings": 16384}
TINY_CONFIG = {**CONFIG, "vocab_size": 128, "hidden_size": 32, "intermediate_size": 64,
               "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2}
#: A scaled Qwen2-MoE (1.5 B parameters): 60 experts of width 1408, top-4, shared expert.
QWEN2_MOE_CONFIG = {"vocab_size": 8192, "hidden_size": 2048, "intermediate_size": 5632,
                    "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632,
                    "num_experts": 60, "num_experts_per_tok": 4, "num_hidden_layers": 8,
                    "num_attention_heads": 16, "num_key_value_heads": 16,
                    "max_position_embeddings": 16384}
ARCHS = {"mixtral": ("MixtralConfig", "MixtralForCausalLM", CONFIG),
         "qwen2_moe": ("Qwen2MoeConfig", "Qwen2MoeForCausalLM", QWEN2_MOE_CONFIG)}


class PhaseRecorder:
    """Forward hooks that turn a model's forward calls into phase intervals.

    Args:
        sync: callable that waits for the device (``torch.cuda.synchronize``), so stamps
            bound the work itself, not its launch.
        merge_gap_s: calls of one phase closer than this merge into one interval.
    """

    def __init__(self, sync, merge_gap_s: float = 0.25) -> None:
        self.sync = sync
        self.merge_gap_s = merge_gap_s
        self.intervals: list[list] = []  # [start, end, phase, forward calls]
        self._t0 = 0.0
        self._phase = "decode"

    def pre(self, module, args, kwargs) -> None:
        ids = kwargs.get("input_ids", args[0] if args else None)
        if ids is None:
            ids = kwargs["inputs_embeds"]
        self._phase = "prefill" if ids.shape[1] > 1 else "decode"
        self.sync()
        self._t0 = time.time()

    def post(self, module, args, kwargs, output) -> None:
        self.sync()
        t1 = time.time()
        last = self.intervals[-1] if self.intervals else None
        if last and last[2] == self._phase and self._t0 - last[1] < self.merge_gap_s:
            last[1] = t1
            last[3] += 1
        else:
            self.intervals.append([self._t0, t1, self._phase, 1])

    def attach(self, model) -> None:
        """Register the hooks on ``model`` (its top-level forward)."""
        model.register_forward_pre_hook(self.pre, with_kwargs=True)
        model.register_forward_hook(self.post, with_kwargs=True)


def split_layers(model):
    """Pipeline placement over every visible GPU (accelerate's ``dispatch_model``): equal runs
    of decoder layers per GPU, embeddings on the first, the final norm and the head on the
    last.  Returns the dispatched model."""
    import torch
    from accelerate import dispatch_model

    n = torch.cuda.device_count()
    layers = model.config.num_hidden_layers
    dmap = {f"model.{name}": 0 for name, _ in model.model.named_children() if name != "layers"}
    dmap.update({f"model.layers.{i}": i * n // layers for i in range(layers)})
    dmap.update({"model.norm": n - 1, "lm_head": n - 1})
    return dispatch_model(model, device_map=dmap)


def build_model(device: str = "cuda:0", config: dict | None = None, seed: int = 0,
                arch: str = "mixtral"):
    """The model with random weights (bf16 on CUDA, fp32 on the CPU).  ``device`` "auto"
    splits the layers over every visible GPU (accelerate's ``dispatch_model``)."""
    import torch
    import transformers

    cfg_name, model_name, default = ARCHS[arch]
    torch.manual_seed(seed)
    cfg = getattr(transformers, cfg_name)(**(config or default))
    dtype = torch.bfloat16 if device != "cpu" else torch.float32
    if device == "auto":
        with torch.device("cuda:0"):
            model = getattr(transformers, model_name)(cfg).to(dtype)
        model = split_layers(model)
    else:
        with torch.device(device):
            model = getattr(transformers, model_name)(cfg).to(dtype)
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    return model.eval()


def run(labels_path: str | Path, seconds: float = 60.0, device: str = "cuda:0", seed: int = 0,
        config: dict | None = None, prompts=(512, 2048, 8192), batches=(1, 4, 16),
        new_tokens=(64, 256), idle_s=(1.5, 3.0), log=print, arch: str = "mixtral") -> list[list]:
    """Serve random ``generate()`` requests for about ``seconds``; write the hook labels.

    Returns:
        The label rows ``[start, end, phase, "", workload]`` written to ``labels_path``.
    """
    import torch

    rng = random.Random(seed)
    model = build_model(device, config, seed, arch)
    if device == "cpu":
        sync = lambda: None
    else:
        def sync() -> None:
            for i in range(torch.cuda.device_count()):
                torch.cuda.synchronize(i)
        device = "cuda:0"  # inputs go to the first GPU (accelerate moves them on)
    vocab = model.config.vocab_size
    # Warm up every prompt shape once, before hooks exist and before the clock starts.
    with torch.inference_mode():
        for p in prompts:
            model.generate(torch.randint(1, vocab, (1, p), device=device), max_new_tokens=2,
                           min_new_tokens=2, do_sample=False)
    sync()
    rec = PhaseRecorder(sync)
    rec.attach(model)
    rows: list[list] = []
    t_end = time.monotonic() + seconds
    idle_from = time.time()
    with torch.inference_mode():
        while time.monotonic() < t_end:
            time.sleep(rng.uniform(*idle_s))
            b, p, n = rng.choice(batches), rng.choice(prompts), rng.choice(new_tokens)
            ids = torch.randint(1, vocab, (b, p), device=device)
            first = len(rec.intervals)
            t0 = time.monotonic()
            model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n,
                           min_new_tokens=n, do_sample=False)
            new = rec.intervals[first:]
            rec.intervals = rec.intervals[:first]  # requests never merge across idle gaps
            rows.append([idle_from, new[0][0], "idle", "", "idle"])
            what = f"hf {arch} generate b={b} prompt={p} new={n}"
            rows += [[s, e, ph, "", what] for s, e, ph, _ in new]
            idle_from = new[-1][1]
            log(f"{what}: {time.monotonic() - t0:.2f} s, prefill "
                f"{sum(e - s for s, e, ph, _ in new if ph == 'prefill'):.3f} s")
    rows.append([idle_from, time.time(), "idle", "", "idle"])
    with Path(labels_path).open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["start", "end", "phase", "hot_gpu", "workload"])
        for s, e, ph, hot, what in rows:
            if e > s:
                w.writerow([f"{s:.6f}", f"{e:.6f}", ph, hot, what])
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tealeaves.kernels_bench.hf_moe",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--labels", type=Path, required=True, help="label CSV to write")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--device", default="cuda:0",
                    help="cuda:N, cpu, or auto (layers split over every visible GPU)")
    ap.add_argument("--arch", choices=sorted(ARCHS), default="mixtral")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    run(args.labels, args.seconds, args.device, args.seed,
        log=lambda s: print(s, flush=True), arch=args.arch)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
