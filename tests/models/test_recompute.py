"""recompute: each policy's gradients against torch's own on the plain model, its saved
bytes against a hand count and Korthikanti's equation, its FLOPs against torch's count
of the forward it redoes, and its options' refusals."""

from __future__ import annotations

import pytest
import torch
from conftest import refused
from torch.utils.checkpoint import set_checkpoint_early_stop
from torch.utils.flop_counter import FlopCounterMode

from snippets.core.cli import OneLineParser
from snippets.core.measure import saved_storages
from snippets.core.timing import Rounds, record
from snippets.models import recompute as rc
from snippets.models.tiny_gpt import GPT, GPTConfig, random_batch, reference_attention

DTYPES = (torch.float32, torch.float64)
CONFIGS = [
    GPTConfig(),
    GPTConfig(37, 7, 3, 3, 15, bias=False, tie_embeddings=False),  # odd everywhere
]


def plain_gradients(cfg: GPTConfig, dtype: torch.dtype, rows: int, attention=None):
    """torch's backward through ``GPT.forward``, nothing recomputed."""
    model = GPT(cfg).to(dtype)
    for block in model.blocks:
        block.attn.attention = attention or block.attn.attention
    idx, targets = random_batch(cfg, rows)
    model(idx, targets)[1].backward()
    return {name: p.grad for name, p in model.named_parameters()}


@pytest.mark.parametrize("cfg", CONFIGS, ids=("default", "odd"))
@pytest.mark.parametrize("dtype", DTYPES, ids=("fp32", "fp64"))
@pytest.mark.parametrize("policy", ("full", "selective"))
def test_gradients_equal_the_plain_models_bit_for_bit(cfg, dtype, policy) -> None:
    want = plain_gradients(cfg, dtype, 3, reference_attention)
    got = rc.gradients(cfg, policy, dtype, 3)
    assert list(got) == list(want)
    for name in want:
        assert torch.equal(got[name], want[name]), name


@pytest.mark.parametrize("dtype", DTYPES, ids=("fp32", "fp64"))
def test_full_recompute_of_the_sdpa_model_is_bit_equal_too(dtype) -> None:
    cfg = CONFIGS[1]
    want = plain_gradients(cfg, dtype, 2)  # the model as it is: SDPA
    model = GPT(cfg).to(dtype)
    idx, targets = random_batch(cfg, 2)
    rc.loss(model, "full", idx, targets).backward()
    for name, p in model.named_parameters():
        assert torch.equal(p.grad, want[name]), name


def test_selective_is_not_sdpa_so_the_equality_can_fail() -> None:
    """The written-out attention's gradients are close to SDPA's but not equal: the
    comparison above is fine enough to tell two kernels apart."""
    cfg = CONFIGS[0]
    sdpa = plain_gradients(cfg, torch.float32, 3)
    selective = rc.gradients(cfg, "selective", torch.float32, 3)
    assert any(not torch.equal(selective[n], sdpa[n]) for n in sdpa)
    for name in sdpa:
        torch.testing.assert_close(selective[name], sdpa[name])


def saved(policy: str, cfg: GPTConfig, x: torch.Tensor) -> list[tuple[int, str]]:
    block = rc.apply_policy(GPT(cfg).double(), policy).blocks[0]
    if policy == "full":
        run = lambda: rc.checkpoint(block, x, use_reentrant=False)  # noqa: E731
    else:
        run = lambda: block(x)  # noqa: E731
    return sorted((s.numel, str(s.dtype)) for s in saved_storages(run, block))


def test_saved_tensors_by_hand_for_one_tiny_layer() -> None:
    """B = 1, s = 3, h = 4, a = 2, fp64. Counted by reading the block: x, LN1's
    output, q, k, v (bmm takes contiguous copies of the heads), the attention output
    (proj's input), x + attn, LN2's output: 8 of 3×4; mean and 1/σ of two LNs: 4 of
    3; fc's output (GELU's input) and GELU's output: 2 of 3×16; and the (1, 2, 3, 3)
    causal mask (masked_fill's, bool) and probabilities (softmax's and the product
    with v's)."""
    cfg = GPTConfig(vocab_size=8, block_size=3, n_layer=1, n_head=2, n_embd=4)
    x = torch.randn(1, 3, 4, dtype=torch.float64, requires_grad=True)
    f64 = "torch.float64"
    selective = sorted([(3, f64)] * 4 + [(12, f64)] * 8 + [(48, f64)] * 2)
    assert saved("selective", cfg, x) == selective
    assert saved("none", cfg, x) == sorted(selective + [(18, "torch.bool"), (18, f64)])
    assert saved("full", cfg, x) == [(12, f64)]  # the block's input alone


def korthikanti(policy: str, s: int, b: int, h: int, a: int, e: int) -> int:
    """Their Table 2 per layer, at e bytes a value instead of 2: 34sbh + 5as²b is
    16 values and 2 one-byte masks a token, 2 values and 1 mask a score; selective
    recompute keeps sbh·34, full 2sbh (the input)."""
    layer, scores = s * b * h * (16 * e + 2), a * s * s * b * (2 * e + 1)
    assert (16 * 2 + 2, 2 * 2 + 1) == (34, 5)  # at e = 2, the paper's numbers
    return {"none": layer + scores, "selective": layer, "full": s * b * h * e}[policy]


@pytest.mark.parametrize("cfg", CONFIGS, ids=("default", "odd"))
@pytest.mark.parametrize("dtype", DTYPES, ids=("fp32", "fp64"))
@pytest.mark.parametrize("policy", rc.POLICIES)
def test_saved_bytes_are_the_papers_up_to_what_this_model_lacks(cfg, dtype, policy):
    """The tiny GPT adds LayerNorm's mean and 1/σ (4 values a token); it has no
    dropout (no 2 masks of h bytes a token, no dropout output of a values a score)."""
    s, h, a, b, e = cfg.block_size, cfg.n_embd, cfg.n_head, 3, dtype.itemsize
    lacks = {"none": 4 * e * s * b - 2 * s * b * h - e * a * s * s * b}
    lacks["selective"], lacks["full"] = 4 * e * s * b - 2 * s * b * h, 0
    measured = rc.layer_bytes(cfg, policy, b, dtype)
    assert measured == korthikanti(policy, s, b, h, a, e) + lacks[policy]


def test_memory_rows_rank_the_policies() -> None:
    rows = rc.memory_rows(CONFIGS[0], rc.POLICIES, 2, torch.float32)
    by = {r["policy"]: r["measured bytes"] for r in rows}
    assert by["full"] < by["selective"] < by["none"]


def forward_flops(run) -> int:
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        run()
    return counter.get_total_flops()


@pytest.mark.parametrize("cfg", CONFIGS, ids=("default", "odd"))
def test_flops_are_a_step_plus_the_forward_each_policy_redoes(cfg) -> None:
    """Torch's own count of the forward (F), of the blocks' forward and of one
    attention core's; a step is 3F. With torch's early stop (the default), a
    checkpoint's last matmul is not redone: mlp.proj (full), the product with v
    (selective); with it off, the whole region is."""
    b, s, h, L = 2, cfg.block_size, cfg.n_embd, cfg.n_layer
    model = rc.apply_policy(GPT(cfg), "none")
    idx, _ = random_batch(cfg, b)
    x = model.embed(idx).detach()

    def blocks() -> None:
        y = x
        for block in model.blocks:
            y = block(y)

    q = torch.randn(b, cfg.n_head, s, h // cfg.n_head)
    F, F_blocks = forward_flops(lambda: model(idx)), forward_flops(blocks)
    F_core = forward_flops(lambda: reference_attention(q, q, q))  # q kᵀ, then · v
    assert rc.counted_flops(cfg, "none", b) == 3 * F
    proj = 2 * b * s * 4 * h * h
    assert rc.counted_flops(cfg, "full", b) == 3 * F + F_blocks - L * proj
    assert rc.counted_flops(cfg, "selective", b) == 3 * F + L * F_core // 2
    with set_checkpoint_early_stop(False):
        for policy, redone in (("full", F_blocks), ("selective", L * F_core)):
            m = rc.apply_policy(GPT(cfg), policy)
            with FlopCounterMode(display=False) as counter:
                rc.loss(m, policy, idx, idx).backward()
            assert counter.get_total_flops() == 3 * F + redone, policy


def fake_record(ratios: list[float]) -> dict:
    """A record whose rounds took the given ratios (the baseline 1 s each)."""
    rounds = Rounds(
        wall={"full": ratios, "none": [1.0] * len(ratios)},
        cpu={"full": ratios, "none": [1.0] * len(ratios)},
        orders=[["full", "none"]] * len(ratios),
    )
    return record(rounds, "full", "none")


def test_the_sentence_places_each_prediction_against_the_iqr() -> None:
    r = fake_record([1.1, 1.2, 1.3, 1.2, 1.25])  # IQR 1.2–1.25
    text = rc.said("full", r, 1.33, 1.22)
    assert "1.33× (calculator), above the IQR" in text
    assert "1.22× (counted), inside it" in text
    assert "slower than no recompute" in text
    assert "below the IQR" in rc.said("full", r, 1.05, 1.2)


def test_main_on_a_small_model_returns_both_tables() -> None:
    out = rc.main(batch=1, seq_len=8, width=8, heads=2, layers=1, rounds=2)
    assert [r["policy"] for r in out["tables"]["time"]] == list(rc.POLICIES)
    assert set(out["records"]) == {"full", "selective"}
    assert len(out["sentences"]) == 2
    only = rc.main(policy=["selective"], batch=1, seq_len=4, width=4, heads=1,
                   layers=1, rounds=1)  # fmt: skip
    assert [r["policy"] for r in only["tables"]["memory"]] == ["none", "selective"]


@pytest.mark.parametrize(
    "args, words",
    [
        ("--policy bogus", "--policy"),
        ("--batch 0", "--batch"),
        ("--seq-len -3", "--seq-len"),
        ("--width x", "--width"),
        ("--heads 0", "--heads"),
        ("--layers 1.5", "--layers"),
        ("--rounds 0", "--rounds"),
    ],
)
def test_bad_options_are_one_line_and_exit_2(capfd, args: str, words: str) -> None:
    parser = OneLineParser(prog="python -m snippets run recompute")
    rc.add_arguments(parser)
    assert words in refused(args.split(), capfd, entry=parser.parse_args)


def test_a_width_the_heads_do_not_divide_is_one_line_and_exit_2(capfd) -> None:
    argv = ["run", "recompute", "--width", "10", "--heads", "3"]
    assert refused(argv, capfd) == "error: --width 10 is not a multiple of --heads 3"
