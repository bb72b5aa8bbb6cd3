"""Wrong: p - rank - 2 warm-up forwards, one short of 1F1B's p - rank - 1."""

from snippets.parallel.pipeline.pipeline_schedules import Action


def one_f_one_b(p, m, rank):
    warmup = min(max(p - rank - 2, 0), m)
    plan = [Action("F", j) for j in range(warmup)]
    for j in range(m - warmup):
        plan += [Action("F", j + warmup), Action("B", j)]
    return plan + [Action("B", j) for j in range(m - warmup, m)]
