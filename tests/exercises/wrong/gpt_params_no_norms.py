"""Wrong: the LayerNorms are left out."""


def total_params(arch, V, s, L, h, a, kv, ffn, tied, bias):
    attention = 4 * h * h + 4 * h * bias
    mlp = 2 * h * ffn + (ffn + h) * bias
    return V * h + s * h + L * (attention + mlp) + (0 if tied else V * h)
