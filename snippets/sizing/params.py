"""Parameter counts from a model's dimensions, whole and per GPU under TP and PP.

Two shapes. ``gpt``: learned token and position embeddings, LayerNorm (weight and bias),
attention q, k, v, o and a GELU MLP h→ffn→h, biases everywhere, the head tied to
the token embedding (GPT-2, GPT-3, the tiny GPT). ``llama``: token embedding only
(RoPE has no parameters), RMSNorm (weight only), grouped-query attention with
``kv_heads`` key/value heads of ``h/heads`` each, a SwiGLU MLP (gate, up, down), no
biases, an untied head. One layer of GPT is 12h² + 13h with biases: Narayanan et al.
2021 (arXiv:2104.04473) eq. 2, P = 12Lh²(1 + 13/(12h) + (V+s)/(12Lh)), which leaves
out the final LayerNorm's 2h.

Under tensor parallelism (Megatron's split) every weight matrix is cut t ways, so are
the biases of the column-split layers (q, k, v, the MLP's first); the row-split
layers' biases (o, the MLP's last) and the norms are replicated. The token embedding
and the head are split by vocabulary; positions are replicated.

Mixture of experts (a model dict with ``experts`` E > 0, see :func:`moe_shape`): layer
i is an MoE layer when i ≥ ``dense_layers`` and i mod ``moe_every`` = 0 (DeepSeek's
``first_k_dense_replace`` and ``moe_layer_freq``, Megatron-LM's ``moe_layer_freq``).
Its feed-forward is a bias-free router (h·E), E routed experts and ``shared_experts``
always-on ones, each the model's MLP at width ``expert_ffn``. Conventions:

* **active** parameters are what one token touches: embedding, attention, norms, the
  router, its k routed experts and the shared ones, the final norm and the head. The
  multi-token-prediction (MTP) modules are in the total, not in the active count.
* Routed experts are split by expert parallelism only (each expert whole on one
  rank, DeepSeek-V3's layout; no expert tensor parallelism). The router and the
  shared experts are split like the dense MLP (TP).
* **EP is folded inside DP** (Megatron-LM, DeepSpeed-MoE): the ep ranks that share
  out a layer's experts are ep of the dp data-parallel ranks, so ep divides dp and
  each expert is replicated over dp·cp/ep ranks (the expert-data-parallel group).
* MLA (DeepSeek-V2/V3's multi-head latent attention) is counted exactly: a model
  dict with an ``mla`` entry uses :func:`mla_params` for its attention.
"""

from __future__ import annotations


# --8<-- [start:params]
def norm_params(arch: str, h: int, bias: bool) -> int:
    """One LayerNorm (gpt: weight, and bias if any) or RMSNorm (llama: weight)."""
    return h * (2 if arch == "gpt" and bias else 1)


def attention_params(h: int, a: int, kv: int, bias: bool) -> tuple[int, int]:
    """(split by TP, replicated): q, k, v, o for a query heads, kv key/value heads."""
    d = h // a  # head dim
    weights = h * a * d + 2 * h * kv * d + a * d * h
    return weights + bias * (a * d + 2 * kv * d), bias * h  # o's bias replicated


def mlp_params(arch: str, h: int, ffn: int, bias: bool) -> tuple[int, int]:
    """(split, replicated): GELU h→ffn→h, or SwiGLU: gate, up h→ffn; down."""
    ins = 1 if arch == "gpt" else 2  # column-split input matrices
    return (ins + 1) * h * ffn + bias * ins * ffn, bias * h


def layer_params(
    arch: str, h: int, a: int, kv: int, ffn: int, bias: bool, t: int = 1
) -> float:
    """One transformer layer's parameters on one of t tensor-parallel ranks."""
    attn_split, attn_rep = attention_params(h, a, kv, bias)
    mlp_split, mlp_rep = mlp_params(arch, h, ffn, bias)
    replicated = 2 * norm_params(arch, h, bias) + attn_rep + mlp_rep
    return (attn_split + mlp_split) / t + replicated


def embedding_params(arch: str, V: int, s: int, h: int, t: int = 1) -> float:
    """Input embeddings on one TP rank: tokens split by vocabulary, gpt positions."""
    return V * h / t + (s * h if arch == "gpt" else 0)


def head_params(V: int, h: int, tied: bool, t: int = 1) -> float:
    """The output projection's own parameters (none when tied to the embedding)."""
    return 0 if tied else V * h / t


def total_params(
    arch: str, V: int, s: int, L: int, h: int, a: int, kv: int, ffn: int, tied, bias
) -> int:
    """Every parameter of the model, counted once."""
    layer = layer_params(arch, h, a, kv, ffn, bias)
    head = head_params(V, h, tied)
    body = L * layer + norm_params(arch, h, bias) + head
    return round(embedding_params(arch, V, s, h) + body)


# --8<-- [end:params]


def count(model: dict) -> int:
    """:func:`total_params` of a dict shaped like a ``presets.MODELS`` entry."""
    keys = ("arch", "vocab", "seq", "layers", "hidden", "heads", "kv_heads", "ffn")
    return total_params(*(model[k] for k in keys), model["tied"], model["bias"])


# --8<-- [start:per_gpu]
def params_per_gpu(
    arch, V, s, L, h, a, kv, ffn, tied, bias, t: int = 1, p: int = 1
) -> float:
    """Parameters on the most loaded GPU of a t × p (TP × PP) grid. The first stage
    holds the embeddings and L/p layers, the last L/p layers, the final norm and the
    head; with a tied head and p > 1 the last stage keeps its own copy of the token
    embedding (as Megatron does) and the two copies' gradients are summed."""
    layers = L / p * layer_params(arch, h, a, kv, ffn, bias, t)
    emb = embedding_params(arch, V, s, h, t)
    last_head = V * h / t if (not tied or p > 1) else 0
    last = layers + norm_params(arch, h, bias) + last_head
    if p == 1:
        return emb + last
    return max(emb + layers, last)


def flop_params(arch: str, V: int, s: int, h: int, tied: bool, total: int) -> int:
    """N of 6N: every parameter but the input embeddings, which are looked up, not
    multiplied (torchtitan excludes them the same way); a tied head is a matmul."""
    return total - (0 if tied else V * h) - (s * h if arch == "gpt" else 0)


# --8<-- [end:per_gpu]


# --8<-- [start:moe]
def mla_params(h: int, a: int, q_rank: int, kv_rank: int, nope: int, rope: int, v: int):
    """(split by TP, replicated) of multi-head latent attention (DeepSeek-V2 §2.1):
    q = W_qb·norm(W_qa·x) (h→q_rank→a·(nope+rope)); [c_kv, k_rope] = W_kva·x
    (h→kv_rank + rope, one rope key shared by every head); [k_nope, v] = W_kvb·
    norm(c_kv) (kv_rank→a·(nope+v)); o (a·v→h). The up-projections and o split by
    head; the down-projections and their two RMSNorms are replicated. No biases."""
    q_down = h * q_rank + q_rank if q_rank else 0  # q_rank 0: q is one h→a·(nope+rope)
    q_up = (q_rank or h) * a * (nope + rope)
    kv_down = h * (kv_rank + rope) + kv_rank
    return q_up + kv_rank * a * (nope + v) + a * v * h, q_down + kv_down


def moe_shape(model: dict) -> dict:
    """The MoE keys of a model dict, with their defaults (a dense model: E = 0)."""
    return {
        "experts": model.get("experts", 0),
        "top_k": model.get("top_k", 0),
        "shared": model.get("shared_experts", 0),
        "expert_ffn": model.get("expert_ffn") or model["ffn"],
        "every": model.get("moe_every", 1),
        "dense": model.get("dense_layers", 0),
        "mtp": model.get("mtp", 0),
    }


def is_moe_layer(i: int, E: int, dense: int, every: int) -> bool:
    return E > 0 and i >= dense and i % every == 0


def stage_layers(L: int, p: int, v: int, j: int) -> list[int]:
    """The layers pipeline stage j holds: chunks j, j + p, ... of L/(p·v) layers."""
    chunk = L // (p * v)
    return [q * chunk + i for q in range(j, p * v, p) for i in range(chunk)]


def moe_layer_parts(model: dict, t: int = 1) -> dict:
    """One layer on one of t TP ranks: ``attn`` (attention and both norms), ``mlp``
    (a dense layer's MLP), ``moe`` (router and shared experts), ``experts`` (the E
    routed ones, whole), ``active`` (a whole MoE layer as one token sees it)."""
    arch, h, a, kv = (model[k] for k in ("arch", "hidden", "heads", "kv_heads"))
    ffn, bias, m = model["ffn"], model["bias"], moe_shape(model)
    if "mla" in model:
        x = model["mla"]
        shape = (x["q_rank"], x["kv_rank"], x["nope"], x["rope"], x["v"])
        attn_split, attn_rep = mla_params(h, a, *shape)
    else:
        attn_split, attn_rep = attention_params(h, a, kv, bias)
    attn = attn_split / t + attn_rep + 2 * norm_params(arch, h, bias)
    mlp_split, mlp_rep = mlp_params(arch, h, ffn, bias)
    one_split, one_rep = mlp_params(arch, h, m["expert_ffn"], bias)
    one = one_split + one_rep  # one expert
    router = h * m["experts"]  # replicated over TP
    return {
        "attn": attn,
        "mlp": mlp_split / t + mlp_rep,
        "moe": m["shared"] * (one_split / t + one_rep) + router,
        "experts": m["experts"] * one,
        "active": attn + (m["top_k"] + m["shared"]) * one + router,
    }


def mtp_params(h: int, layer: float, t: int = 1) -> float:
    """One MTP module's own parameters (DeepSeek-V3 §2.2): two RMSNorms on its inputs,
    the projection of their concatenation 2h→h, a layer, the head's norm; it shares
    the embedding and the head with the main model."""
    return 2 * h * h / t + 3 * h + layer


# --8<-- [end:moe]


# --8<-- [start:moe_counts]
def moe_counts(model: dict, t: int = 1, p: int = 1, v: int = 1, ep: int = 1) -> dict:
    """Every count the estimate needs of a model with experts. ``total``: each
    parameter once (MTP modules in); ``main``: without MTP; ``active``; ``flop``: N of
    6N (active, MTP's layer and head matmul in, input embeddings out); ``per_gpu``
    and ``experts_per_gpu``: the most loaded GPU's non-expert and expert parameters
    (t × p grid, v chunks, E/ep experts a rank), and that stage's layer counts."""
    arch, V, s, L, h = (model[k] for k in ("arch", "vocab", "seq", "layers", "hidden"))
    tied, bias, m = model["tied"], model["bias"], moe_shape(model)
    E, dense, every = m["experts"], m["dense"], m["every"]
    full, mine = moe_layer_parts(model), moe_layer_parts(model, t)
    moe_n = sum(is_moe_layer(i, E, dense, every) for i in range(L))
    mtp_moe = is_moe_layer(L, E, dense, every)  # MTP's layer is layer L's kind
    mtp_layer = full["attn"] + (
        full["moe"] + full["experts"] if mtp_moe else full["mlp"]
    )
    mtp = m["mtp"] * mtp_params(h, mtp_layer)
    ends = embedding_params(arch, V, s, h) + norm_params(arch, h, bias)
    ends += head_params(V, h, tied)
    dense_part = (L - moe_n) * (full["attn"] + full["mlp"])
    main = ends + dense_part + moe_n * (full["attn"] + full["moe"] + full["experts"])
    active = ends + dense_part + moe_n * full["active"]
    mtp_active = full["active"] if mtp_moe else full["attn"] + full["mlp"]
    mtp_flop = m["mtp"] * (mtp_params(h, mtp_active) + V * h)  # + the head's matmul
    best = None
    for j in range(p):
        layers = stage_layers(L, p, v, j)
        n_moe = sum(is_moe_layer(i, E, dense, every) for i in layers)
        n_dense = len(layers) - n_moe
        own = n_dense * (mine["attn"] + mine["mlp"]) + n_moe * (
            mine["attn"] + mine["moe"]
        )
        experts = n_moe * mine["experts"] / ep
        if j == 0:
            own += embedding_params(arch, V, s, h, t)
        if j == p - 1:
            own += norm_params(arch, h, bias) + (V * h / t if not tied or p > 1 else 0)
            mtp_own = mine["attn"] + (mine["moe"] if mtp_moe else mine["mlp"])
            own += m["mtp"] * mtp_params(h, mtp_own, t)
            experts += m["mtp"] * mtp_moe * mine["experts"] / ep
        if best is None or own + experts > best[0] + best[1]:
            best = (own, experts, n_dense, n_moe)
    return {
        "total": round(main + mtp),
        "main": round(main),
        "active": round(active),
        "flop": flop_params(arch, V, s, h, tied, round(active)) + mtp_flop,
        "per_gpu": best[0],
        "experts_per_gpu": best[1],
        "stage_dense": best[2],
        "stage_moe": best[3],
        "moe_layers": moe_n,
        "layer_active": (dense_part + moe_n * full["active"]) / L,
        "layer_tp": mine["attn"]
        + largest_kind(mine, L - moe_n, moe_n, m["mtp"], mtp_moe),
        "layer_experts": mine["experts"] / ep,
        "h_q": attention_width(model),
    }


def largest_kind(
    mine: dict, n_dense: int, n_moe: int, mtp: int, mtp_moe: bool
) -> float:
    """The larger non-expert block (a dense layer's MLP, or an MoE layer's router and
    shared experts) of the layer kinds the model has, its MTP modules' included: the
    block ZeRO-3 gathers beside the attention."""
    has_dense = n_dense > 0 or (mtp > 0 and not mtp_moe)
    has_moe = n_moe > 0 or (mtp > 0 and mtp_moe)
    return max(mine["mlp"] if has_dense else 0, mine["moe"] if has_moe else 0)


def attention_width(model: dict) -> float:
    """H·Q of 12·L·H·Q·T: heads × head width; MLA's q·kᵀ is nope + rope wide a head
    and its scores·v is v wide, so the mean of the two."""
    if "mla" not in model:
        return model["hidden"]
    x = model["mla"]
    return model["heads"] * (x["nope"] + x["rope"] + x["v"]) / 2


# --8<-- [end:moe_counts]
