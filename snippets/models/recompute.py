"""Activation recomputation, measured: what each policy saves, and what it costs.

Backward needs tensors from the forward. Recomputation keeps fewer of them and runs
part of the forward again, inside backward, to get the rest back. Three policies on
the one model (``tiny_gpt``, through its slicing contract):

* ``none``: the plain model; autograd keeps everything it needs.
* ``full``: each block is run under ``torch.utils.checkpoint.checkpoint(block, x,
  use_reentrant=False)``: only the block's input is saved, and backward runs the
  block's forward again before its backward (one more forward of every layer).
* ``selective``: Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
  Transformer Models" (arXiv:2205.05198), §4.2: only attention's core (q kᵀ, the
  mask, softmax, dropout and the product with v, ``block.attn.attention``) runs under
  the checkpoint. It holds the 5as²b bytes of Table 2's sbh(34 + 5as/h) and costs
  only its two matmuls' forward to redo.

The tiny GPT's default attention is SDPA, which keeps no s × s scores for backward;
with it, selective recomputation would have nothing to drop. So every policy here runs
the written-out ``reference_attention``, whose scores are real tensors.

Three checks, each against something that does not share the code under test:

1. the gradients: every parameter's gradient under ``full`` and ``selective`` equals
   the plain model's (``GPT.forward``, torch's own backward) bit for bit
   (``torch.equal``), in fp32 and in fp64. Recomputing runs the same operations on
   the same values in the same order, so on a deterministic CPU nothing may differ.
2. the bytes: one block's forward under ``torch.autograd.graph.saved_tensors_hooks``,
   counting each distinct storage autograd packs, beside the calculator's
   ``layer_bytes(…, recompute=…, flash=False)`` (``snippets.sizing.activations``).
   They differ by a stated amount, asserted to the byte: Korthikanti counts dropout
   masks and attention's dropout output (our dropout is 0), and not LayerNorm's mean
   and 1/σ (4 values a token); the causal mask masked_fill keeps (1 byte a score)
   stands where their attention dropout mask was.
3. the time: the three training steps take turns (``snippets.core.timing``); each
   policy's time ÷ no recompute's, round by round, median and IQR, beside the ratio
   the calculator's FLOPs predict (``snippets.sizing.flops``: 6N + 12Lhs a token;
   full recompute adds every layer's forward, selective the attention core's 4Lhs).
   FLOPs are counted too (``FlopCounterMode``) and held to that formula, up to the
   biases and norms (in N, in no matmul) and torch's early stop: a checkpoint stops
   recomputing once every tensor it saved is back, so its last matmul is not redone.

    python -m snippets run recompute [--policy none full selective] [--batch B]
        [--seq-len S] [--width H] [--heads A] [--layers L] [--rounds R]
"""

from __future__ import annotations

import argparse
import textwrap
import time
from typing import Callable

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint
from torch.utils.flop_counter import FlopCounterMode

from snippets.core.claims import law
from snippets.core.cli import main_entry, positive_int
from snippets.core.measure import saved_storages
from snippets.core.runtime import Spec, UsageError, print0
from snippets.core.timing import interleave, record, sentence
from snippets.models.tiny_gpt import GPT, GPTConfig, random_batch, reference_attention
from snippets.sizing import activations, flops, params

SPEC = Spec(
    summary="activation recomputation: none, full, selective; bytes saved, time paid",
    timed=True,  # it measures time: run-all runs it alone
)
POLICIES = ("none", "full", "selective")
CALLS = 4  # training steps in a row make one timed sample


# --8<-- [start:policies]
def recomputed_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor
) -> torch.Tensor:
    """Korthikanti §4.2's selective recomputation: q, k, v (B, H, s, d/H) are saved;
    the scores and probabilities (B, H, s, s) are dropped and rebuilt in backward."""
    return checkpoint(reference_attention, q, k, v, use_reentrant=False)


def apply_policy(model: GPT, policy: str) -> GPT:
    """Every block's attention written out; under ``selective``, checkpointed."""
    if policy not in POLICIES:
        raise UsageError(
            f"unknown policy {policy!r}: choose from {', '.join(POLICIES)}"
        )
    core = recomputed_attention if policy == "selective" else reference_attention
    for block in model.blocks:
        block.attn.attention = core
    return model


def loss(
    model: GPT, policy: str, idx: torch.Tensor, targets: torch.Tensor
) -> torch.Tensor:
    """The mean cross-entropy of ``GPT.forward``; under ``full`` each block is a
    checkpoint: its input x (B, s, h) is all it keeps, and its forward runs again in
    backward. ``none`` and ``selective`` are the model's own forward."""
    if policy != "full":
        return model(idx, targets)[1]
    x = model.embed(idx)  # (B, s, h)
    for block in model.blocks:
        x = checkpoint(block, x, use_reentrant=False)
    logits = model.head(x)  # (B, s, V)
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def gradients(
    cfg: GPTConfig, policy: str, dtype: torch.dtype, batch: int
) -> dict[str, torch.Tensor]:
    """Every parameter's gradient after one step under ``policy``, by name."""
    model = apply_policy(GPT(cfg).to(dtype), policy)
    idx, targets = random_batch(cfg, batch)
    loss(model, policy, idx, targets).backward()
    return {name: p.grad for name, p in model.named_parameters()}


# --8<-- [end:policies]


# --8<-- [start:count]
def layer_bytes(cfg: GPTConfig, policy: str, batch: int, dtype: torch.dtype) -> int:
    """Bytes block 0 saves under ``policy`` for one input x (batch, s, h)."""
    block = apply_policy(GPT(cfg).to(dtype), policy).blocks[0]
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(batch, cfg.block_size, cfg.n_embd, generator=gen).to(dtype)
    x.requires_grad_()
    if policy == "full":
        saved = saved_storages(lambda: checkpoint(block, x, use_reentrant=False), block)
    else:
        saved = saved_storages(lambda: block(x), block)
    return sum(s.nbytes for s in saved)


def known_difference(cfg: GPTConfig, policy: str, b: int, e: int) -> tuple[int, str]:
    """Measured − Korthikanti's count, in bytes, and why (e bytes a value)."""
    s, h, a = cfg.block_size, cfg.n_embd, cfg.n_head
    if policy == "full":
        return 0, ""
    norms, masks = 4 * e * s * b, 2 * h * s * b  # 2 LNs × (mean, 1/σ); 1-byte masks
    if policy == "selective":
        return norms - masks, "+ norm statistics - dropout masks"
    why = "+ norm statistics - dropout masks - attention's dropout output"
    return norms - masks - e * a * s * s * b, why  # the causal mask, 1 byte, stays


def memory_rows(cfg: GPTConfig, policies, batch: int, dtype: torch.dtype) -> list:
    """One layer's saved bytes, measured, beside the calculator + the difference."""
    s, h, a, e = cfg.block_size, cfg.n_embd, cfg.n_head, dtype.itemsize
    rows = []
    for policy in policies:
        measured = layer_bytes(cfg, policy, batch, dtype)
        formula = activations.layer_bytes(
            "gpt", s, s, batch, h, a, a, 4 * h, e, recompute=policy, flash=False
        )
        known, why = known_difference(cfg, policy, batch, e)
        law(formula + known == measured, (policy, formula, known, measured))
        rows.append({"policy": policy, "measured bytes": measured,
                     "calculator": round(formula), "known difference": known,
                     "why": why})  # fmt: skip
    for row in rows:
        row["÷ none"] = round(row["measured bytes"] / rows[0]["measured bytes"], 3)
    return rows


# --8<-- [end:count]


# --8<-- [start:time]
def predicted_flops(cfg: GPTConfig, policy: str, batch: int) -> float:
    """The calculator's FLOPs for one step: 6N + 12Lhs a token, plus what the policy
    recomputes (every layer's forward, or attention's two matmuls)."""
    V, s, L, h, a = (cfg.vocab_size, cfg.block_size, cfg.n_layer, cfg.n_embd,
                     cfg.n_head)  # fmt: skip
    N = params.flop_params("gpt", V, s, h, cfg.tie_embeddings, cfg.num_params())
    layer = params.layer_params("gpt", h, a, a, 4 * h, cfg.bias)
    per_token = flops.model_flops_per_token(N, L, h, s)
    per_token += flops.recompute_flops(policy, layer, L, h, s)
    return per_token * batch * s


def counted_flops(cfg: GPTConfig, policy: str, batch: int) -> int:
    """Matmul FLOPs of one forward + backward, counted by torch, recompute included,
    held to the calculator's. Two known differences a token: N has the biases and
    norms, which no matmul multiplies (6 FLOPs each, 2 more for a layer's under full
    recompute); and a checkpoint stops recomputing once every tensor it saved is back
    (torch's early stop), so its last matmul, whose output nothing saved, is not
    redone: mlp.proj's 2·4h² (full), the product with v's 2sh (selective), a layer."""
    model = apply_policy(GPT(cfg), policy)
    idx, targets = random_batch(cfg, batch)
    with FlopCounterMode(display=False) as counter:
        loss(model, policy, idx, targets).backward()
    s, h, L = cfg.block_size, cfg.n_embd, cfg.n_layer
    vectors = sum(p.numel() for p in model.parameters() if p.dim() == 1)
    layer = sum(p.numel() for p in model.blocks[0].parameters() if p.dim() == 1)
    not_redone = {"none": 0, "full": 2 * (layer + 4 * h * h), "selective": 2 * s * h}
    known = -(6 * vectors + L * not_redone[policy]) * batch * s
    counted = counter.get_total_flops()
    law(predicted_flops(cfg, policy, batch) + known == counted, (policy, counted))
    return counted


def time_policies(cfg: GPTConfig, policies, batch: int, rounds: int) -> dict:
    """fp32 training steps, the policies taking turns; each against ``none``. A
    sample is the mean of ``CALLS`` steps in a row, so one stall weighs less. One
    intra-op thread: on a shared machine a second thread waits for a core another
    program holds, and that wait, not the work, would be timed. The CPU clock counts
    the whole process."""
    idx, targets = random_batch(cfg, batch)
    models = {p: apply_policy(GPT(cfg), p) for p in policies}

    def step(policy: str) -> Callable[[], None]:
        def run() -> None:
            models[policy].zero_grad(set_to_none=True)
            loss(models[policy], policy, idx, targets).backward()

        return run

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        steps, calls = {p: step(p) for p in policies}, dict.fromkeys(policies, CALLS)
        turns = interleave(steps, rounds, calls=calls, cpu_clock=time.process_time,
                           device=torch.device("cpu"))  # fmt: skip
    finally:
        torch.set_num_threads(threads)
    return {p: record(turns, p, "none") for p in policies if p != "none"}


def time_rows(cfg: GPTConfig, batch: int, counted: dict, records: dict) -> list:
    """Per policy: FLOPs counted, ÷ none's, the calculator's ÷ none; time, median
    [IQR], and median CPU time (none's from any record: it is every baseline)."""
    rows = []
    for policy, n in counted.items():
        r = records.get(policy) or next(iter(records.values()))
        side = "" if policy in records else "baseline_"
        ms = [r[f"{side}time{q}_s"] * 1e3 for q in ("", "_lo", "_hi")]
        predicted = predicted_ratio(cfg, policy, batch)
        rows.append({"policy": policy, "FLOPs a step": n,
                     "÷ none": round(n / counted["none"], 3),
                     "calculator ÷ none": round(predicted, 3),
                     "time ms": f"{ms[0]:.1f} [{ms[1]:.1f}–{ms[2]:.1f}]",
                     "CPU ms": round(r[f"{side}cpu_s"] * 1e3, 1)})  # fmt: skip
    return rows


def said(policy: str, r: dict, calculator: float, counted: float) -> str:
    """The harness's sentence, then where the two FLOP ratios fall against its IQR."""

    def where(x: float) -> str:
        lo, hi = r["ratio_lo"], r["ratio_hi"]
        return "inside" if lo <= x <= hi else "below" if x < lo else "above"

    text = sentence(r, f"{policy} recompute", "no recompute")
    return (
        f"{text} FLOPs predict {calculator:.2f}× (calculator), {where(calculator)} "
        f"the IQR, and {counted:.2f}× (counted), {where(counted)} it."
    )


def predicted_ratio(cfg: GPTConfig, policy: str, batch: int) -> float:
    return predicted_flops(cfg, policy, batch) / predicted_flops(cfg, "none", batch)


# --8<-- [end:time]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--policy", nargs="+", choices=POLICIES, default=list(POLICIES),
        help="policies to run (none, the baseline, always runs)",
    )  # fmt: skip
    for flag, default, what in (
        ("--batch", 4, "B, sequences a step"),
        ("--seq-len", 128, "s, tokens a sequence"),
        ("--width", 128, "h, the model width"),
        ("--heads", 4, "a, attention heads (h must be a multiple)"),
        ("--layers", 4, "L, transformer blocks"),
        ("--rounds", 15, "timed rounds, the policies taking turns"),
    ):
        parser.add_argument(flag, type=positive_int, default=default, help=what)


def config(seq_len: int, width: int, heads: int, layers: int) -> GPTConfig:
    if width % heads:
        raise UsageError(f"--width {width} is not a multiple of --heads {heads}")
    return GPTConfig(block_size=seq_len, n_layer=layers, n_head=heads, n_embd=width)


# --8<-- [start:main]
def main(policy=POLICIES, batch=4, seq_len=128, width=128, heads=4, layers=4,
         rounds=15) -> dict:  # fmt: skip
    cfg = config(seq_len, width, heads, layers)
    policies = ("none", *dict.fromkeys(p for p in policy if p != "none"))
    for dtype in (torch.float32, torch.float64):
        want = gradients(cfg, "none", dtype, batch)  # torch's own backward
        for p in policies[1:]:
            got = gradients(cfg, p, dtype, batch)
            differ = [n for n in want if not torch.equal(got[n], want[n])]
            law(not differ, f"{p}, {dtype}: gradients differ: {differ}")
    memory = memory_rows(cfg, policies, batch, torch.float32)
    counted = {p: counted_flops(cfg, p, batch) for p in policies}
    print0(f"B={batch} s={seq_len} h={width} a={heads} L={layers}, attention written "
           "out (its s × s scores are saved tensors)")  # fmt: skip
    n = len(list(GPT(cfg).parameters()))
    print0(f"{n} parameters' gradients, fp32 and fp64: {' = '.join(policies)}, bit "
           "for bit ✓")  # fmt: skip
    print0("one layer's saved bytes = calculator + known difference ✓")
    print0("FLOPs counted in one step = calculator + known difference ✓")
    if len(policies) == 1:
        return {"tables": {"memory": memory}}
    records = time_policies(cfg, policies, batch, rounds)
    sentences = [
        said(p, r, predicted_ratio(cfg, p, batch), counted[p] / counted["none"])
        for p, r in records.items()
    ]
    print0("time, fp32, one intra-op thread, the policies taking turns:")
    for line in sentences:
        print0(textwrap.fill(line, 88, subsequent_indent="  "))
    tables = {"memory": memory, "time": time_rows(cfg, batch, counted, records)}
    return {"tables": tables, "records": records, "sentences": sentences}


# --8<-- [end:main]


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
