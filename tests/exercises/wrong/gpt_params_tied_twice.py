"""Wrong: the tied head is counted as a matrix of its own."""


def total_params(arch, V, s, L, h, a, kv, ffn, tied, bias):
    norm = h * (1 + bias)
    attention = 4 * h * h + 4 * h * bias
    mlp = 2 * h * ffn + (ffn + h) * bias
    return V * h + s * h + L * (2 * norm + attention + mlp) + norm + V * h
