"""Wrong: the head (d → V) left out of the matmuls."""

from snippets.hardware.step_profile import Call


def op_costs(cfg, rows, s=4):
    T, d, L, N = rows * cfg.block_size, cfg.n_embd, cfg.n_layer, cfg.block_size
    linears = [(d, d)] * 4 + [(d, 4 * d), (4 * d, d)]
    mm = [Call(2 * T * k * n, 0) for k, n in linears * L]
    fwd, bwd = Call(4 * rows * N * N * d, 0), Call(10 * rows * N * N * d, 0)
    return {"matmul": mm * 3, "attention": [fwd] * L + [bwd] * L}
