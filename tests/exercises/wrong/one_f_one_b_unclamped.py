"""Wrong: the warm-up is p - rank - 1 even when there are fewer micro-batches."""

from snippets.parallel.pipeline.pipeline_schedules import Action


def one_f_one_b(p, m, rank):
    warmup = p - rank - 1
    plan = [Action("F", j) for j in range(warmup)]
    for j in range(m - warmup):
        plan += [Action("F", j + warmup), Action("B", j)]
    return plan + [Action("B", j) for j in range(max(m - warmup, 0), m)]
