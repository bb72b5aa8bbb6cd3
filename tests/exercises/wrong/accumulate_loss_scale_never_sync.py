"""Wrong: the last micro-batch's backward also runs under no_sync: nothing syncs."""


def accumulate(model, micro_batches):
    k = len(micro_batches)
    with model.no_sync():
        for idx, targets in micro_batches:
            (model(idx, targets)[1] / k).backward()
