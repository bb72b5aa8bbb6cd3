"""Wrong: the right gradient, but every micro-batch's backward syncs (no no_sync)."""


def accumulate(model, micro_batches):
    k = len(micro_batches)
    for idx, targets in micro_batches:
        (model(idx, targets)[1] / k).backward()
