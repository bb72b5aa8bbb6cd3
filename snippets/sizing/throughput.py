"""Step time and tokens per second, from FLOPs at a stated efficiency and from
communication with an explicit overlap assumption.

* Compute: the GPU's hardware FLOPs of a step (recompute included) at ``efficiency``
  × the dense peak: the MFU its kernels would reach with nothing else in the way.
* Pipeline bubble: 1F1B idles (p - 1) micro-batch slots of m; with v interleaved
  chunks each slot is 1/v as long (Narayanan et al. 2021 §2.2): compute ×
  (1 + (p - 1)/(v·m)).
* Communication: TP, PP and EP are on the critical path (the next matmul needs their
  result). DP and CP can overlap compute: ``overlap`` is the fraction of their time
  hidden, never more than the compute time itself. 0 (the default) is the
  pessimistic bound, 1 the hope.
"""

from __future__ import annotations


# --8<-- [start:step]
def compute_seconds(flops: float, peak: float, efficiency: float) -> float:
    return flops / (peak * efficiency)


def bubble_factor(p: int, m: int, v: int = 1) -> float:
    return 1 + (p - 1) / (v * m)


def step_seconds(
    compute: float, bubble: float, dp: float, tp: float, pp: float, cp: float, overlap,
    ep: float = 0.0,
) -> float:  # fmt: skip
    hidden = min(overlap * (dp + cp), compute)
    return compute * bubble + tp + pp + ep + dp + cp - hidden


def tokens_per_second(global_batch: int, s: int, step: float) -> float:
    return global_batch * s / step


# --8<-- [end:step]
