"""Wrong: stage 1 shards the gradients as well as the optimizer states."""


def model_state_bytes(stage, psi, N, p, g, K):
    params = p * psi / (N if stage >= 3 else 1)
    grads = g * psi / (N if stage >= 1 else 1)
    optimizer = K * psi / (N if stage >= 1 else 1)
    return {
        "parameters": params,
        "gradients": grads,
        "optimizer": optimizer,
        "total": params + grads + optimizer,
    }
