"""Wrong: every forward first, then every backward: that is GPipe."""

from snippets.parallel.pipeline.pipeline_schedules import Action


def one_f_one_b(p, m, rank):
    return [Action("F", j) for j in range(m)] + [Action("B", j) for j in range(m)]
