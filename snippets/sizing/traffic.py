"""Communication per GPU per training step, for each parallelism: bytes and seconds.

Each parallelism issues a list of calls ``(kind, buffer_bytes, count)`` per step on
its group of n ranks. ``kind`` is ``all_reduce``, ``all_gather`` (buffer = the
gathered size), ``reduce_scatter`` (buffer = the input size) or ``send`` (one
point-to-point message). Bytes a GPU sends are the buffer times nccl-tests' bus factor
(``doc/PERFORMANCE.md``: 2(n-1)/n for all-reduce, (n-1)/n for the other two, 1 for a
send). Seconds come from the α-β model of ``snippets.sizing.cost_formulas`` with ring
algorithms: a ring all-reduce is 2(n-1)α + 2(n-1)/n·B/bw, all-gather and
reduce-scatter (n-1)α + (n-1)/n·B/bw, a send α + B/bw (the reduction's γ left out).

* DP, over the dp × cp ranks, with weight bytes w and gradient bytes g a parameter
  and P parameters a GPU: ZeRO-0 all-reduces the gradients (2Ψ of the ZeRO paper);
  ZeRO-1 reduce-scatters them once a step and all-gathers the updated weights; ZeRO-2
  reduce-scatters each micro-batch's gradients (they are not kept whole); ZeRO-3
  also all-gathers the weights for every micro-batch's forward and again for its
  backward (3Ψ), and needs no gather after the step.
* TP: two all-reduces of b·s·h activations a layer a micro-batch forward, two
  backward, two more in a full recompute; with SP each is an all-gather plus a
  reduce-scatter, the same bytes (Korthikanti et al. 2022 §4.2.2).
* PP: each micro-batch's activation forward and its gradient backward across every
  stage boundary, once per chunk with v interleaved chunks (a middle stage, the most
  loaded); 1/t of it with SP, whose activations are already split.
* CP: ring attention passes each GPU's K and V chunk (b·s/cp·h_kv/t each) cp-1 hops
  a layer forward; backward passes K, V and their gradients; full recompute adds a
  forward.
* EP: every MoE layer a micro-batch, two all-to-alls forward (dispatch, combine) and
  two backward (their gradients), two more in a full recompute. A GPU dispatches its
  share of the tokens, b·s/(cp·t) (the TP ranks share the micro-batch's tokens out
  among them: Megatron-LM's dispatcher with SP), k rows of h values each. Uniform
  routing: (ep - 1)/ep of the k·b·s/(cp·t) rows go to other ranks, so an all-to-all's
  bus factor is (n - 1)/n. Dropless: no rows dropped, none padded to a capacity. The
  α-β time is the pairwise exchange's: (n - 1) steps, (n - 1)α + (n - 1)/n·B/bw.
"""

from __future__ import annotations

from snippets.sizing.cost_formulas import (
    Machine,
    ring_all_gather_cost,
    ring_cost,
    ring_reduce_scatter_cost,
)

Call = tuple[str, float, float]  # (kind, buffer bytes, count per step)
COSTS = {
    "all_reduce": ring_cost,
    "all_gather": ring_all_gather_cost,
    "reduce_scatter": ring_reduce_scatter_cost,
}


# --8<-- [start:cost]
def bus_factor(kind: str, n: int) -> float:
    """Bytes a rank sends ÷ buffer bytes (nccl-tests' busbw factor)."""
    if kind == "send":
        return 1.0
    return (2 if kind == "all_reduce" else 1) * (n - 1) / n  # all_to_all: (n-1)/n


def call_seconds(kind: str, buffer: float, n: int, alpha: float, bw: float) -> float:
    """One call on n ranks joined by links of bw bytes/s and α s a message."""
    if n == 1:
        return 0.0
    if kind == "send":
        return alpha + buffer / bw
    if kind == "all_to_all":  # n - 1 pairwise steps of buffer/n each
        return (n - 1) * alpha + (n - 1) / n * buffer / bw
    return COSTS[kind](n).time(buffer, Machine(alpha=alpha, beta=1 / bw))


def sent_bytes(calls: list[Call], n: int) -> float:
    return sum(count * buf * bus_factor(kind, n) for kind, buf, count in calls)


def seconds(calls: list[Call], n: int, alpha: float, bw: float) -> float:
    return sum(count * call_seconds(k, buf, n, alpha, bw) for k, buf, count in calls)


# --8<-- [end:cost]


# --8<-- [start:calls]
def dp_calls(P: float, w: float, g: float, zero: int, m: int) -> list[Call]:
    grads, weights = P * g, P * w
    if zero == 0:
        return [("all_reduce", grads, 1)]
    if zero == 3:
        return [("reduce_scatter", grads, m), ("all_gather", weights, 2 * m)]
    return [
        ("reduce_scatter", grads, m if zero == 2 else 1),
        ("all_gather", weights, 1),
    ]


def tp_calls(b, s_loc, h, e, layers, m, sp=False, recompute="none") -> list[Call]:
    passes = 3 if recompute == "full" else 2  # forward, backward, again forward
    n_calls = 2 * passes * layers * m
    act = b * s_loc * h * e  # the whole activation: SP gathers it, then scatters
    if sp:
        return [("all_gather", act, n_calls), ("reduce_scatter", act, n_calls)]
    return [("all_reduce", act, n_calls)]


def pp_calls(b, s_loc, h, e, m, p, v=1, t=1, sp=False) -> list[Call]:
    if p == 1:
        return []
    return [("send", b * s_loc * h * e / (t if sp else 1), 2 * m * v)]


def cp_calls(b, s_loc, h_kv, e, layers, m, cp, t=1, recompute="none") -> list[Call]:
    if cp == 1:
        return []
    passes = 4 if recompute == "full" else 3  # K,V forward; K,V + dK,dV backward
    return [("send", 2 * b * s_loc * h_kv * e / t, passes * (cp - 1) * layers * m)]


def ep_calls(b, s_loc, h, e, k, moe_layers, m, ep, t=1, recompute="none") -> list:
    if ep == 1:
        return []
    passes = 3 if recompute == "full" else 2  # forward, backward, again forward
    rows = k * b * s_loc / t  # token-expert assignments this GPU dispatches
    return [("all_to_all", rows * h * e, 2 * passes * moe_layers * m)]


# --8<-- [end:calls]


def link(span: int, gpus_per_node: int, bw_intra: float, bw_inter: float, **alphas):
    """(α, bandwidth) of a group of ``span`` consecutive ranks: inside one node
    (NVLink or PCIe) when span ≤ gpus_per_node, else over each GPU's NIC."""
    if span <= gpus_per_node:
        return alphas["alpha_intra"], bw_intra
    return alphas["alpha_inter"], bw_inter
