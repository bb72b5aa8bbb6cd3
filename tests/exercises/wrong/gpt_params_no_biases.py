"""Wrong: biases are left out, as if bias were always False."""


def total_params(arch, V, s, L, h, a, kv, ffn, tied, bias):
    norm = h
    layer = 2 * norm + 4 * h * h + 2 * h * ffn
    return V * h + s * h + L * layer + norm + (0 if tied else V * h)
