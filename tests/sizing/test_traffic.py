"""Communication bytes and α-β seconds: nccl-tests' bus factors, the ZeRO paper's 2Ψ
and 3Ψ, Korthikanti's four TP all-reduces a layer, hand-worked PP and CP volumes; and
against our own runs, counted at the call in one 2-rank launch: the tensor-parallel
and sequence-parallel tiny GPT, the pipeline executor, context parallel's ring; and
in a 3-rank launch, expert_parallel's all-to-all rows."""

from __future__ import annotations

import functools

import pytest
import torch
import torch.distributed as dist

from snippets.core.runtime import launch
from snippets.models.moe import MoE
from snippets.models.tiny_gpt import GPT, GPTConfig, random_batch
from snippets.parallel.context import context_parallel
from snippets.parallel.context.context_parallel_gpt import RingLog
from snippets.parallel.experts.expert_parallel import ExpertParallelMoE
from snippets.parallel.pipeline.pipeline_executor import execute
from snippets.parallel.sharded import mixed_precision
from snippets.parallel.tensor import sequence_parallel_memory as sp_memory
from snippets.parallel.tensor import tp_gpt
from snippets.parallel.tensor.sequence_parallel import (
    allreduce_sequence_grads,
    sequence_parallel_gpt,
    sp_logits,
)
from snippets.parallel.tensor.tensor_parallel import CommLog
from snippets.parallel.tensor.tp_gpt import tensor_parallel_gpt
from snippets.parallel.tensor.vocab_parallel import vocab_parallel_cross_entropy
from snippets.sizing import activations, traffic


def test_bus_factors_are_nccl_tests() -> None:
    # NVIDIA/nccl-tests doc/PERFORMANCE.md: all-reduce 2(n-1)/n, the others (n-1)/n
    for n in (2, 3, 8):
        assert traffic.bus_factor("all_reduce", n) == 2 * (n - 1) / n
        assert traffic.bus_factor("all_gather", n) == (n - 1) / n
        assert traffic.bus_factor("reduce_scatter", n) == (n - 1) / n


def test_alpha_beta_seconds_by_hand() -> None:
    a, bw, B = 5e-6, 100e9, 1e9
    # ring all-reduce on 4: 6α + (6/4)·B/bw
    assert traffic.call_seconds("all_reduce", B, 4, a, bw) == pytest.approx(
        6 * a + 1.5 * B / bw
    )
    assert traffic.call_seconds("all_gather", B, 4, a, bw) == pytest.approx(
        3 * a + 0.75 * B / bw
    )
    assert traffic.call_seconds("send", B, 2, a, bw) == pytest.approx(a + B / bw)
    assert traffic.call_seconds("all_reduce", B, 1, a, bw) == 0


def test_dp_is_2psi_then_3psi() -> None:
    # ZeRO paper §7: stages 0-2 move 2Ψ (as buffers: reduce-scatter + all-gather, or
    # one all-reduce of Ψ counted twice by its bus factor), stage 3 moves 3Ψ.
    psi, n = 1000, 4
    for stage, values in ((0, 2), (1, 2), (2, 2), (3, 3)):
        calls = traffic.dp_calls(psi, 1, 1, stage, m=1)
        sent = traffic.sent_bytes(calls, n)
        assert sent == pytest.approx(values * psi * (n - 1) / n)
    # ZeRO-2 and -3 reduce every micro-batch's gradients; ZeRO-0/1 once a step
    assert traffic.sent_bytes(traffic.dp_calls(psi, 0, 1, 2, 4), n) == 4 * 750
    assert traffic.sent_bytes(traffic.dp_calls(psi, 0, 1, 1, 4), n) == 750


def test_tp_four_allreduces_a_layer_and_sp_moves_the_same() -> None:
    b, s, h, e, L, m, t = 2, 128, 64, 2, 3, 5, 4
    act = b * s * h * e
    plain = traffic.tp_calls(b, s, h, e, L, m)
    assert plain == [("all_reduce", act, 4 * L * m)]  # Korthikanti §4.2.2
    sp = traffic.tp_calls(b, s, h, e, L, m, sp=True)
    assert traffic.sent_bytes(sp, t) == traffic.sent_bytes(plain, t)
    full = traffic.tp_calls(b, s, h, e, L, m, recompute="full")
    assert full[0][2] == 6 * L * m  # the recomputed forward repeats its two


def test_pp_and_cp_volumes_by_hand() -> None:
    b, s, h, e, m = 1, 1024, 256, 2, 8
    assert traffic.pp_calls(b, s, h, e, m, p=1) == []
    one = b * s * h * e
    assert traffic.sent_bytes(traffic.pp_calls(b, s, h, e, m, 4), 4) == 2 * m * one
    assert traffic.sent_bytes(traffic.pp_calls(b, s, h, e, m, 4, v=2), 4) == (
        4 * m * one
    )
    # CP = 4, s_loc = 256, h_kv = 64, t = 2: K and V chunks 2·256·64·2/2 bytes,
    # 3 hops a layer forward, twice that backward (K, V and dK, dV)
    calls = traffic.cp_calls(b, 256, 64, e, layers=2, m=1, cp=4, t=2)
    assert traffic.sent_bytes(calls, 4) == 2 * 256 * 64 * 2 / 2 * 3 * 3 * 2


def test_link_inside_or_across_nodes() -> None:
    gpu = dict(alpha_intra=1e-6, alpha_inter=9e-6)
    assert traffic.link(8, 8, 450e9, 50e9, **gpu) == (1e-6, 450e9)
    assert traffic.link(16, 8, 450e9, 50e9, **gpu) == (9e-6, 50e9)


# --- against our own runs: fp64 everywhere, so e = 8 bytes a value -------------------
E, T = 8, 2  # fp64; 2 ranks
CFG = GPTConfig()  # the tiny GPT: the calculator's "tiny-gpt" preset
B = 4  # rows of the batch


def sp_counts(cfg: GPTConfig, b: int) -> dict:
    """One step of the sequence-parallel GPT: elements sent, by op and phase."""
    idx, targets = random_batch(cfg, b, seed=3)
    log = CommLog()
    model = sequence_parallel_gpt(GPT(cfg).double(), None, log)
    loss = vocab_parallel_cross_entropy(sp_logits(model, idx, None, log), targets)
    loss.backward()
    allreduce_sequence_grads(model, None, log)
    return {
        (op, phase): (log.count(tag="blocks.0", op=op, phase=phase),
                      float(log.sent(tag="blocks.0", op=op, phase=phase)))
        for op in ("all_gather", "reduce_scatter", "all_reduce")
        for phase in ("forward", "backward")
    } | {"grads": float(log.sent(tag="sequence_grads"))}  # fmt: skip


def pp_sends(cfg: GPTConfig, m: int) -> dict:
    """One 1F1B step of the pipeline executor: the bytes this rank sends."""
    idx, targets = random_batch(cfg, B, seed=4)
    log = RingLog()  # counts every c10d send at the op, with its bytes
    with log:
        run = execute(GPT(cfg).double(), "1f1b", idx, targets, m, group=None)
    return {"sends": [n for *_, n in log.sends], "peak": run.peak_in_flight}


def saved_activations(cfg: GPTConfig, b: int) -> list[dict]:
    """sequence_parallel_memory's count: one layer's saved tensors, dense, TP, SP."""
    dense = GPT(cfg).double()
    tp, sp = tensor_parallel_gpt(dense), sequence_parallel_gpt(dense)
    return sp_memory.compare(dense, tp, sp, b, cfg.block_size, cfg)


def mixed_precision_bytes(cfg: GPTConfig) -> list[dict]:
    """mixed_precision's bf16 GPT with fp32 Adam masters after one step, ZeRO 0-3:
    the bytes this rank holds (Adam's step counters left out) and its share."""
    data = random_batch(cfg, 2 * dist.get_world_size(), steps=1)
    rows = []
    for stage in range(4):
        module, opt = mixed_precision.mixed_run(
            cfg, stage, torch.optim.Adam, {"lr": 1e-3}, data
        )
        mine = sum(pc.b - pc.a for pc in opt.pieces) if stage else None
        rows.append({"stage": stage, "held": mixed_precision.held_bytes(module, opt)})
        rows[-1]["mine"] = mine
    return rows


def measure_our_runs() -> dict:
    """Every measurement the sizing tests compare with, on this 2-rank group: TP, SP,
    PP (m = 2, 4) and CP bytes counted at the call; saved activations; ZeRO bytes."""
    return {
        "tp": tp_gpt.train_against_dense(CFG, steps=1, b=2),
        "sp": sp_counts(CFG, b=2),
        "pp": {m: pp_sends(CFG, m) for m in (2, 4)},
        "cp": context_parallel.train_against_single(context_parallel.CFG, 1, b=2),
        "activations": saved_activations(CFG, b=2),
        "zero": mixed_precision_bytes(CFG),
    }


@functools.cache
def our_runs() -> list[dict]:
    """One launch for the whole sizing suite (test_activations and test_memory read
    it too): starting ranks costs seconds, the measurements a fraction of one."""
    return launch(measure_our_runs, T, "gloo", timeout_s=120)


@pytest.fixture(scope="module")
def runs() -> list[dict]:
    return our_runs()


def test_tp_bytes_equal_tp_gpt_commlog(runs) -> None:
    # tp_gpt's CommLog: every all-reduce's elements at the call, a ring's 2(t-1)/t
    # of each; the calculator: 4 all-reduces of b·s·h·e a layer (2 fwd, 2 bwd).
    tp, b, s, h, L = runs[0]["tp"], 2, CFG.block_size, CFG.n_embd, CFG.n_layer
    one_layer = traffic.tp_calls(b, s, h, E, layers=1, m=1)
    assert tp["per_layer"] * E == traffic.sent_bytes(one_layer, T)
    assert (
        [c["all_reduces"] for c in tp["comm"]] == [2, 2] == [one_layer[0][2] // 2] * 2
    )
    # Known difference: the calculator counts the layers only. The vocab-parallel
    # embedding's g and the head's f (one b·s·h all-reduce each) and the loss's three
    # all-reduces of b·s values (max, Σexp, target logit) are the rest.
    ring = 2 * (T - 1) / T
    outside = sum(tp["outside_blocks"].values())
    assert outside == ring * (2 * b * s * h + 3 * b * s)
    whole = traffic.sent_bytes(traffic.tp_calls(b, s, h, E, L, m=1), T)
    assert (L * tp["per_layer"] + outside) * E == whole + ring * E * (
        2 * b * s * h + 3 * b * s
    )


def test_sp_bytes_equal_sequence_parallel_commlog(runs) -> None:
    # The calculator: per layer 4 all-gathers and 4 reduce-scatters of b·s·h·e, the
    # TP all-reduces' bytes (Korthikanti §4.2.2). Measured reduce-scatters: equal.
    sp, b, s, h = runs[0]["sp"], 2, CFG.block_size, CFG.n_embd
    calls = dict(
        (k, (buf, n)) for k, buf, n in traffic.tp_calls(b, s, h, E, 1, 1, sp=True)
    )
    share = (T - 1) / T
    rs = [sp[("reduce_scatter", p)] for p in ("forward", "backward")]
    assert sum(n for n, _ in rs) == calls["reduce_scatter"][1] == 4
    assert sum(x for _, x in rs) * E == traffic.sent_bytes(
        [("reduce_scatter", *calls["reduce_scatter"])], T
    )
    # Known difference: our GatheredLinears saves the N/t shard, not the gathered
    # input, and gathers it again in backward (as Megatron-LM does): 2 all-gathers a
    # layer more than the calculator's 4, one (b, s, h) buffer each.
    ag = [sp[("all_gather", p)] for p in ("forward", "backward")]
    assert [n for n, _ in ag] == [2, 4]
    predicted = traffic.sent_bytes([("all_gather", *calls["all_gather"])], T)
    assert sum(x for _, x in ag) * E == predicted + 2 * share * b * s * h * E
    assert sp[("all_reduce", "forward")] == sp[("all_reduce", "backward")] == (0, 0.0)
    # and outside the layers: the norms' and row-parallel biases' partial gradients
    # are all-reduced over TP after backward, which the calculator leaves out
    assert sp["grads"] > 0


def test_pp_bytes_equal_the_executor_sends(runs) -> None:
    # The calculator's pp_calls: per micro-batch, its activation forward and its
    # gradient backward, b·s·h·e each, for a stage with a neighbour on both sides.
    s, h, V, p = CFG.block_size, CFG.n_embd, CFG.vocab_size, T
    for m in (2, 4):
        b = B // m
        predicted = traffic.sent_bytes(traffic.pp_calls(b, s, h, E, m, p), p)
        first, last = (r["pp"][m] for r in runs)
        # Known difference 1: with p = 2 there is no middle stage; the first sends the
        # m activations, the last the m gradients: each half of the calculator's.
        # Known difference 2: the tied embedding's gradient, V·h, swapped between the
        # first and the last stage once a step (Megatron's embedding all-reduce).
        tied = V * h * E
        for mine in (first, last):
            assert len(mine["sends"]) == m + 1 and sorted(mine["sends"])[-1] == tied
            assert sum(mine["sends"]) - tied == predicted / 2
        # the first stage holds min(m, p) micro-batches, as activations.in_flight says
        assert first["peak"] == activations.in_flight(m, p)


def test_cp_bytes_equal_the_ring_log(runs) -> None:
    # context_parallel's RingLog: every tensor the ring sends, at c10d::send, by
    # layer and phase. The calculator's cp_calls: K and V (2·b·(s/cp)·h_kv·e) cp - 1
    # hops forward, and K, V and dK, dV backward: 3(cp - 1) of them a layer.
    cfg, cp, b = context_parallel.CFG, T, 2
    s, h = cfg.block_size, cfg.n_embd
    kv = 2 * b * (s // cp) * h * E
    calls = traffic.cp_calls(b, s // cp, h, E, layers=1, m=1, cp=cp)
    assert calls == [("send", kv, 3 * (cp - 1))]
    for r in runs:
        layer0 = {c["phase"]: c for c in r["cp"]["comm"] if c["layer"] == 0}
        assert layer0["forward"]["bytes"] == (cp - 1) * kv  # equal
        # Known difference: our ring brings dK, dV home in cp hops, not cp - 1 (the
        # last hop returns each rank's own): one K, V-sized send a layer more.
        assert layer0["backward"]["bytes"] == 2 * (cp - 1) * kv + kv
        total = layer0["forward"]["bytes"] + layer0["backward"]["bytes"]
        assert total == traffic.sent_bytes(calls, cp) + kv


# --- expert parallelism: expert_parallel's own counter -------------------------------
EP_D, EP_E, EP_K, EP_T = 12, 6, 2, 12  # width, experts, top-k, tokens a rank


def uniform_tokens(rank: int) -> torch.Tensor:
    """Tokens whose top-2 experts are j mod E, then j + 1 mod E: over 12 tokens every
    expert gets k·T/E = 4 assignments from each rank, the uniform routing the
    calculator assumes (the router below reads the first E features)."""
    g = torch.Generator().manual_seed(rank)
    x = torch.randn(EP_T, EP_D, generator=g, dtype=torch.float64) * 0.01
    for j in range(EP_T):
        x[j, j % EP_E] += 2.0
        x[j, (j + 1) % EP_E] += 1.0
    return x


def ep_rows() -> dict:
    """One forward and backward of ExpertParallelMoE: the rows this rank sent."""
    dense = MoE(EP_D, 16, EP_E, top_k=EP_K, seed=1).double()
    with torch.no_grad():
        dense.router.weight.zero_()
        dense.router.weight[:, :EP_E] = 10 * torch.eye(EP_E, dtype=torch.float64)
    ep = ExpertParallelMoE.from_dense(dense)
    x = uniform_tokens(dist.get_rank()).requires_grad_()
    ep(x).pow(2).sum().backward()
    return dict(ep.comm)


def test_ep_bytes_equal_expert_parallel_counter() -> None:
    # expert_parallel's comm counts the rows each rank sends to other ranks: forward
    # its dispatch out and its combine out, backward the same exchanges reversed. The
    # calculator: 4 all-to-alls a MoE layer of k·T rows of h values, (ep-1)/ep of them
    # to other ranks. With routing exactly uniform the two agree row for row.
    ep = 3
    counts = launch(ep_rows, ep, "gloo", timeout_s=120)
    calls = traffic.ep_calls(1, EP_T, EP_D, E, EP_K, 1, 1, ep)
    predicted = traffic.sent_bytes(calls, ep)
    for rank_rows in counts:
        assert rank_rows["forward"] == rank_rows["backward"] == 32  # 2·k·T·(2/3)
        rows = rank_rows["forward"] + rank_rows["backward"]
        assert rows * EP_D * E == predicted
