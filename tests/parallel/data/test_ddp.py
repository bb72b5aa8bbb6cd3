"""DDP by hand against one process on the whole batch and against torch's DDP (fp64,
1e-12), with accumulation, frozen, tied and unused parameters, and picotron#39's bug."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
import torch.nn as nn
from conftest import refused

from snippets.core.compare import max_difference
from snippets.core.runtime import UsageError, launch
from snippets.models.tiny_gpt import GPT, GPTConfig, random_batch
from snippets.parallel.data import ddp, ddp_buckets
from snippets.parallel.data.ddp import DDP, train

CFG = GPTConfig(vocab_size=64, block_size=16, n_layer=2, n_head=2, n_embd=32)
TOL = 1e-12


def model(**frozen: bool) -> nn.Module:
    m = GPT(CFG, seed=0).double()
    for name, t in m.named_parameters():
        t.requires_grad_(not frozen.get(name.replace(".", "_"), False))
    return m


def accumulate(m: nn.Module, batches: list[tuple], k: int, scale: bool) -> None:
    """k micro-steps per optimizer step, all but the last under no_sync(): the
    module's ``accumulate``, or the same without its 1/k."""
    p, rank = dist.get_world_size(), dist.get_rank()
    opt = torch.optim.SGD(m.parameters(), lr=0.5, momentum=0.9)
    for idx, targets in batches:  # (k·p·b, N): micro-batch j, then rank r's rows
        micro = [
            (i.tensor_split(p)[rank], t.tensor_split(p)[rank])
            for i, t in zip(idx.tensor_split(k), targets.tensor_split(k))
        ]
        if scale:
            ddp.accumulate(m, micro)
        for j, (i, t) in enumerate(micro if not scale else []):
            with m.no_sync() if j < k - 1 else torch.enable_grad():
                m(i, t)[1].backward()  # no 1/k: k times the mean gradient
        opt.step()
        opt.zero_grad()


def averages_the_parameter(m: nn.Module) -> nn.Module:
    """picotron#39: the hook receives the parameter, and all-reduces it, not .grad."""

    def hook(t: torch.Tensor) -> None:
        dist.all_reduce(t.data)
        t.data.div_(dist.get_world_size())

    for t in m.parameters():
        t.register_post_accumulate_grad_hook(hook)
    return m


def rank_checks() -> dict:
    p, out = dist.get_world_size(), {}
    run = ddp.main(bucket_cap_mb=0.05, steps=3)  # ours vs torch DDP vs one process
    out["vs_torch"], out["vs_single"] = run["vs_torch"], run["vs_single"]
    out["buckets"] = len(run["tables"]["buckets"])
    batches = random_batch(CFG, 3 * p * 2, steps=2)
    single = train(model(), batches, split=False)
    for scale in (True, False):  # 3 micro-steps of 2p rows = one step of 6p rows
        ours = DDP(model(), bucket_cap_mb=0.05)
        accumulate(ours, batches, k=3, scale=scale)
        out[f"accumulate_scaled_{scale}"] = max_difference(ours.module, single)
    batches = random_batch(CFG, 2 * p, steps=2)
    bad = train(averages_the_parameter(model()), batches)
    out["param_hook"] = max_difference(bad, train(model(), batches, split=False))
    # frozen: no hook, no bucket, .grad stays None; training equals one process's
    frozen = {"pos_emb_weight": True, "blocks_0_ln1_bias": True}
    ours = DDP(model(**frozen), bucket_cap_mb=0.05)
    out["frozen_params"] = len(ours.params)
    train(ours, batches)
    out["frozen"] = max_difference(ours.module, train(model(**frozen), batches, False))
    out["frozen_grad_none"] = ours.module.pos_emb.weight.grad is None
    # tied: one parameter, one bucket, and the count is the formula's
    ours = DDP(model(), bucket_cap_mb=0.05)
    out["numel"] = sum(t.numel() for t in ours.params)
    tied = [
        b
        for b in ours.buckets
        for i in b
        if ours.params[i] is ours.module.tok_emb.weight
    ]
    out["tied_buckets"] = len(tied)
    # one all-reduce per bucket, SUM, launched during backward; none under no_sync
    ops, all_reduce = [], dist.all_reduce
    dist.all_reduce = lambda t, op=dist.ReduceOp.SUM, *a, **k: (
        ops.append(op) or all_reduce(t, op, *a, **k)
    )
    try:
        idx, targets = batches[0]
        with ours.no_sync():
            ours(idx, targets)[1].backward()
        out["no_sync_calls"] = len(ops)
        ours(idx, targets)[1].backward()
    finally:
        dist.all_reduce = all_reduce
    out["ops"] = [str(op) for op in ops]
    out["overlap"] = ours.timeline[0]["start"] < ours.timeline[-1]["ready"]
    out["timeline_done"] = all("end" in e for e in ours.timeline)
    # a parameter forward never uses: one clear error on every rank
    m = model()
    m.unused = nn.Linear(2, 2).double()
    ours = DDP(m)
    try:
        ours(idx, targets)[1].backward()
        out["unused"] = "no error"
    except RuntimeError as exc:
        out["unused"] = str(exc)
    try:
        DDP(model(), bucket_cap_mb=0)
    except UsageError as exc:
        out["bad_cap"] = str(exc)
    return out


@pytest.mark.parametrize("p", [1, 2, 3])
def test_ddp_against_one_process_and_torch(p: int) -> None:
    for out in launch(rank_checks, p, backend="gloo", timeout_s=120):
        assert out["vs_torch"] < TOL and out["vs_single"] < TOL, out
        assert out["buckets"] == 4
        assert out["accumulate_scaled_True"] < TOL, out
        assert out["accumulate_scaled_False"] > 1e-3, out  # unscaled: k× too big
        assert out["frozen"] < TOL and out["frozen_grad_none"], out
        n_tensors = len(list(GPT(CFG).parameters()))
        assert out["frozen_params"] == n_tensors - 2
        assert out["numel"] == CFG.num_params() and out["tied_buckets"] == 1
        assert out["no_sync_calls"] == 0
        assert out["ops"] == [str(dist.ReduceOp.SUM)] * out["buckets"]
        assert out["overlap"] and out["timeline_done"]
        assert "unused.weight" in out["unused"] and "backward" in out["unused"]
        assert "bucket_cap_mb" in out["bad_cap"]
        if p > 1:  # picotron#39 fails the same oracle; with one rank it cannot
            assert out["param_hook"] > 1e-3, out


def test_bad_bucket_cap_is_one_line_and_exit_2(capfd) -> None:
    assert "--bucket-cap-mb" in refused(["run", "ddp", "--bucket-cap-mb", "0"], capfd)


@pytest.mark.parametrize("cap_mb", [0.01, 0.05, 25.0])
def test_buckets_match_torchs_assignment(cap_mb: float) -> None:
    params = list(GPT(CFG).double().parameters())
    first = min(ddp_buckets.FIRST_BUCKET_BYTES, int(cap_mb * ddp_buckets.MIB))
    limits = [first, int(cap_mb * ddp_buckets.MIB)]
    backwards = params[::-1]  # torch's rebuilt buckets follow gradient-ready order
    theirs, _ = dist._compute_bucket_assignment_by_size(backwards, limits)
    n = len(params)
    assert ddp_buckets.assign_buckets(params, cap_mb) == [
        [n - 1 - j for j in bucket] for bucket in theirs
    ]


def test_bucket_cap_must_be_positive() -> None:
    with pytest.raises(UsageError, match="bucket_cap_mb"):
        ddp_buckets.assign_buckets([torch.zeros(3)], 0.0)
