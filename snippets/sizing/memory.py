"""Bytes per GPU for the model states: weights, gradients, optimizer state; the total.

Per parameter: ``weight`` bytes of the copy the GPU computes with, ``grad`` bytes of
gradient, and an optimizer state of ``master`` bytes (an fp32 copy, mixed precision
only) plus 8 (Adam's fp32 m and v) or 4 (SGD's momentum). Where the anchors differ:

* bf16-mixed is 2 + 4 + 12 = 18 bytes here, as Megatron-LM keeps its gradients in
  fp32 (``theoretical_memory_usage.py``; a distributed optimizer makes it 6 + 12/dp);
  the ZeRO paper's mixed-precision Adam is 2 + 2 + 12 = 16 (fp16 gradients). The
  ``grad_bytes`` argument picks either.
* ZeRO (Rajbhandari et al. 2020): stage 1 shards the optimizer state over the N
  data-parallel ranks, stage 2 the gradients too, stage 3 the weights too. The
  formula is ``snippets.sizing.zero_memory.model_state_bytes``, reused here.
  With fp32 gradients, stage 2 is 2Ψ + 16Ψ/N; DeepSpeed's estimator code says 2Ψ + 18Ψ/N
  and its docs 4Ψ + 16Ψ/N (both Adam, model states only).
* Stage 3 also holds one layer gathered at full size while it computes (DeepSpeed's
  estimator counts 4 bytes × the largest layer); it is ``buffers`` here, in
  ``weight`` bytes. A run that prefetches the next layer's gather while one computes
  (FSDP2 does by default, and so does the ZeRO note's stage 3) holds up to two: this
  counts one.

The ZeRO group is the data-parallel ranks times the context-parallel ones (they hold
the same weights, as Megatron-LM's distributed optimizer shards over dp × cp).
"""

from __future__ import annotations

from snippets.sizing.zero_memory import model_state_bytes

# --8<-- [start:bytes]
PRECISIONS = {  # bytes per parameter: compute weight, gradient, fp32 master copy
    "bf16-mixed": {"weight": 2, "grad": 4, "master": 4},
    "fp32": {"weight": 4, "grad": 4, "master": 0},
}
OPTIMIZER_STATE = {"adam": 8, "sgd": 4}  # fp32 m and v; fp32 momentum
ACTIVATION_BYTES = {"bf16-mixed": 2, "fp32": 4}  # one stored activation value


def optimizer_bytes(precision: str, optimizer: str) -> int:
    """K of the ZeRO paper: the optimizer's bytes per parameter, master copy in."""
    return PRECISIONS[precision]["master"] + OPTIMIZER_STATE[optimizer]


def model_states(
    params: float, weight: float, grad: float, optim: float, zero: int, n: int
) -> dict[str, float]:
    """Weights, gradients, optimizer bytes of ``params`` parameters on one of the n
    ranks of a ZeRO-``zero`` group (0 is plain data parallelism)."""
    found = model_state_bytes(zero, params, n, weight, grad, optim)
    return {
        "weights": found["parameters"],
        "gradients": found["gradients"],
        "optimizer": found["optimizer"],
    }


def zero3_buffer(layer_params: float, weight: float, zero: int, n: int) -> float:
    """Stage 3's one gathered layer, beside its own shard: (1 - 1/n) of a layer."""
    return layer_params * weight * (1 - 1 / n) if zero == 3 else 0.0


def total_bytes(parts: dict[str, float]) -> float:
    return sum(parts.values())


def fits(total: float, capacity: float) -> bool:
    """Fits if the modelled bytes are at most the GPU's memory. Not modelled: the
    CUDA context, the allocator's fragmentation, NCCL's buffers (a few GB)."""
    return total <= capacity


# --8<-- [end:bytes]
