"""A ZeRO-3 training state saved with ``torch.distributed.checkpoint`` (DCP) on four
ranks, and loaded back under other layouts: one process, dp2·tp2, a two-stage
pipeline, ZeRO-3 on three ranks.

DCP stores every tensor as chunks (an offset and a size in each dimension, a box) in
one file per rank, and a ``.metadata`` file that says which box lies where. Loading
asks for other boxes: each rank names the boxes it holds in the new layout, and DCP
reads every saved chunk that overlaps them. So the layout at load time needs nothing
from the layout at save time but the full shapes.

ZeRO's shard is not a box. Rank r of N owns values [r·s, (r+1)·s) of the *flattened*
parameter (s = ⌈n/N⌉, :mod:`snippets.parallel.sharded.zero_shards`), which for a
(30, 30) weight on 4 ranks starts and ends in the middle of a row. ``DTensor`` cannot
say that (its shards are even slices along a dimension), so the save cuts each
flat range into at most three boxes (:func:`boxes`: a part row, whole rows, a part
row) and hands them to DCP as a ``ShardedTensor`` with several local shards. The
pipeline and the single process load plain full tensors; dp2·tp2 loads ``DTensor``
slices of the tensor-parallel model (:mod:`snippets.parallel.tensor.tp_gpt`); ZeRO-3
on 3 ranks loads the same flat-range boxes as the save, for N = 3.

Two oracles. The state each layout loads, assembled again to full tensors, must equal
with ``torch.equal`` the state the four ZeRO ranks gathered *before* saving, by their
own all-gathers, a path that never touches the files. And that state must be within
1e-12 of one process that trained the same steps with plain Adam (ZeRO sums the
gradients in another order, so not bit for bit).

    python -m snippets run reshard_checkpoint                 # save once, load 4 ways
    python -m snippets run reshard_checkpoint --save DIR      # keep the checkpoint
    python -m snippets run reshard_checkpoint --load DIR --layout dp2tp2
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import tempfile
import warnings
from dataclasses import asdict
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed._shard.sharded_tensor import Shard, ShardedTensor, ShardMetadata
from torch.distributed._shard.sharded_tensor.metadata import (
    ShardedTensorMetadata,
    TensorProperties,
)
from torch.distributed.checkpoint import DefaultLoadPlanner
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor
from torch.distributed.tensor import Shard as DShard

from snippets.core.claims import Law, check, law
from snippets.core.cli import main_entry
from snippets.core.compare import max_difference
from snippets.core.runtime import Spec, UsageError, launch
from snippets.models.tiny_gpt import GPT, GPTConfig, random_batch
from snippets.parallel.gpt_3d_model import rank_model
from snippets.parallel.mesh import Mesh
from snippets.parallel.sharded import zero

SPEC = Spec(summary="a ZeRO-3 checkpoint from 4 ranks, loaded under four other layouts")

CFG = GPTConfig(n_embd=30)  # d = 30: a (d, d) weight's quarter ends mid-row
SAVE_RANKS, STEPS, LR, DTYPE = 4, 2, 1e-2, torch.float64
STATE = ("exp_avg", "exp_avg_sq")  # Adam's per-value state; "step" is one number
LAYOUTS = ("one", "dp2tp2", "pp2", "zero3")
MAX_RANKS = 8
TIMEOUT_S = 60.0
REFERENCE = "gathered.pt"  # beside DCP's files: the state gathered before the save


@contextlib.contextmanager
def quiet():
    """Two warnings torch gives every time, and why they do not apply: ShardedTensor
    is deprecated for DTensor, which cannot hold a flat range; a load without a
    process group is taken for a single process, which it is."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Please use DTensor instead")
        warnings.filterwarnings("ignore", "torch.distributed is disabled")
        yield


# --8<-- [start:boxes]
def boxes(shape: tuple[int, ...], a: int, b: int) -> list[tuple[tuple, tuple]]:
    """Values [a, b) of a tensor of ``shape``, flattened row-major, as boxes
    (offsets, sizes) in ``shape``, in order: a part row, whole rows, a part row, each
    part row cut the same way one dimension down. Their values, read box by box, are
    the flat range in order."""
    if a >= b:
        return []
    if len(shape) == 1:
        return [((a,), (b - a,))]
    inner = math.prod(shape[1:])  # values in one row
    found, row = [], a // inner
    if a % inner:  # starts inside a row: the rest of that row (or less)
        end = min(b, (row + 1) * inner)
        below = boxes(shape[1:], a - row * inner, end - row * inner)
        found += [((row, *o), (1, *s)) for o, s in below]
        a, row = end, row + 1
    whole = max(0, (b - a) // inner)
    if whole:
        found.append(((row, *[0] * (len(shape) - 1)), (whole, *shape[1:])))
    if a < b and (rest := b - (row + whole) * inner):  # ends inside a row
        found += [((row + whole, *o), (1, *s)) for o, s in boxes(shape[1:], 0, rest)]
    return found


def zero_range(n: int, N: int, rank: int) -> tuple[int, int]:
    """ZeRO's flat range [a, b) of rank ``rank``: chunks of s = ⌈n/N⌉, as Piece."""
    s = -(-n // N)
    a = min(n, rank * s)
    return a, min(n, a + s)


def zero_tensor(flat: torch.Tensor, shape: tuple, N: int) -> ShardedTensor:
    """This rank's ZeRO chunk (flat, b - a values) as a ShardedTensor of ``shape``:
    every rank's boxes in the metadata, this rank's as views into ``flat``, so a
    load writes straight into the chunk."""
    rank, shards, local, start = dist.get_rank(), [], [], 0
    for r in range(N):
        a, b = zero_range(math.prod(shape), N, r)
        for offsets, sizes in boxes(shape, a, b):
            md = ShardMetadata(list(offsets), list(sizes), f"rank:{r}/cpu")
            shards.append(md)
            if r == rank:  # the next values of this rank's chunk, in a box's shape
                k = math.prod(sizes)
                local.append(Shard(flat[start : start + k].view(sizes), md))
                start += k
    meta = ShardedTensorMetadata(
        shards, torch.Size(shape), TensorProperties(flat.dtype)
    )
    return ShardedTensor._init_from_local_shards_and_global_metadata(local, meta)


# --8<-- [end:boxes]


# --8<-- [start:save]
def zero_state(module, optimizer, N: int) -> dict:
    """What DCP saves from a ZeRO-3 rank: every parameter and its Adam state as
    boxes of the full shape, the step count as a plain (replicated) tensor."""
    names = {id(p): name for name, p in module.named_parameters()}
    state = {"config": config_text()}  # not a tensor: DCP pickles it
    for piece in optimizer.pieces:
        name, shape = names[id(piece.param)], tuple(piece.param.shape)
        adam = optimizer.inner.state[piece.chunk]
        state[f"model.{name}"] = zero_tensor(piece.chunk.data, shape, N)
        for key in STATE:
            state[f"optim.{name}.{key}"] = zero_tensor(adam[key], shape, N)
        state[f"optim.{name}.step"] = adam["step"]
    return state


def save_zero3(folder: str) -> dict:
    """Train ZeRO-3 for STEPS, gather the full state by collectives, save with DCP."""
    N = dist.get_world_size()
    data = random_batch(CFG, 2 * N, steps=STEPS)
    adam = torch.optim.Adam
    module, optimizer, _ = zero.train_sharded(CFG, 3, adam, {"lr": LR}, data, DTYPE)
    gathered = gather_zero(module, optimizer)  # before the save, by all-gathers
    with quiet():
        dcp.save(zero_state(module, optimizer, N), checkpoint_id=folder)
    if dist.get_rank() == 0:
        torch.save(gathered, os.path.join(folder, REFERENCE))
    return gathered


# --8<-- [end:save]


def gather_zero(module, optimizer) -> dict:
    """The full state of a ZeRO model: parameters by ZeRO's own gather, each Adam
    tensor by an all-gather of the padded chunks."""
    full = zero.full_state_dict(module)
    names = {id(p): name for name, p in module.named_parameters()}
    out = {}
    for piece in optimizer.pieces:
        name, adam = names[id(piece.param)], optimizer.inner.state[piece.chunk]
        out[f"model.{name}"] = full[name]
        for key in STATE:
            every = adam[key].new_empty(piece.N * piece.s)  # (N·s,)
            dist.all_gather_single(every, piece.padded(adam[key], piece.s, 0))
            out[f"optim.{name}.{key}"] = every[: piece.n].view(piece.param.shape)
        out[f"optim.{name}.step"] = adam["step"].clone()
    return out


def train_one_process() -> dict:
    """The second oracle: one process, the whole batch, plain Adam; the same keys."""
    model = GPT(CFG).to(DTYPE)
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)
    for idx, targets in random_batch(CFG, 2 * SAVE_RANKS, steps=STEPS):
        optimizer.zero_grad()
        model(idx, targets)[1].backward()
        optimizer.step()
    return full_of(model, optimizer, {})


def full_of(model, optimizer, gathered: dict) -> dict:
    """A model's state in the checkpoint's keys: ``gathered[name]`` where this rank
    holds a slice (already assembled), else the tensor itself."""
    out = {}
    for name, p in model.named_parameters():
        adam = optimizer.state[p]
        out[f"model.{name}"] = gathered.get(f"model.{name}", p.detach())
        for key in STATE:
            out[f"optim.{name}.{key}"] = gathered.get(f"optim.{name}.{key}", adam[key])
        out[f"optim.{name}.step"] = adam["step"]
    return {k: v.detach().clone() for k, v in out.items()}


# --8<-- [start:layout]
def mesh_targets(model, group) -> dict:
    """What one rank of a (dp, pp, tp) layout asks DCP for: each parameter it holds
    and that parameter's Adam state. A tensor-parallel slice is a DTensor on the tp
    group, Shard(dim) where its shape differs from the dense one; the rest is full."""
    dense = dict(GPT(CFG).named_parameters())
    tp_mesh = DeviceMesh.from_group(group, "cpu") if group is not None else None
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)
    targets, slices = {}, {}
    for name, p in model.named_parameters():
        full = tuple(dense[name].shape)
        cut = [d for d, (x, y) in enumerate(zip(p.shape, full)) if x != y]
        adam = {key: torch.zeros_like(p) for key in STATE}
        adam["step"] = torch.zeros(())
        optimizer.state[p] = adam
        for key, local in [("model", p.data)] + [(k, adam[k]) for k in STATE]:
            fqn = f"model.{name}" if key == "model" else f"optim.{name}.{key}"
            if cut:  # a view of the local slice: the load writes into the model
                targets[fqn] = DTensor.from_local(
                    local,
                    tp_mesh,
                    [DShard(cut[0])],
                    run_check=False,
                    shape=torch.Size(full),
                    stride=dense[name].stride(),
                )
                slices[fqn] = cut[0]
            else:
                targets[fqn] = local
        targets[f"optim.{name}.step"] = adam["step"]
    return {"targets": targets, "slices": slices, "optimizer": optimizer}


def load_mesh(folder: str, dp: int, pp: int, tp: int) -> dict:
    """Load into the tiny GPT cut as ``rank_model`` cuts it for a (dp, pp, tp) mesh;
    return the state this rank holds, its tp slices gathered back to full."""
    mesh = Mesh(dp=dp, pp=pp, tp=tp)
    model = rank_model(CFG, mesh, sequence_parallel=False)
    asked = mesh_targets(model, mesh.tp_group if tp > 1 else None)
    planner = ReadRecorder()
    with quiet():
        dcp.load(asked["targets"], checkpoint_id=folder, planner=planner)
    gathered = {}
    for fqn, dim in asked["slices"].items():
        local = asked["targets"][fqn].to_local()
        parts = [torch.empty_like(local) for _ in range(tp)]
        dist.all_gather(parts, local.contiguous(), group=mesh.tp_group)
        gathered[fqn] = torch.cat(parts, dim)
    return {"state": full_of(model, asked["optimizer"], gathered), "read": planner.read}


# --8<-- [end:layout]


def load_zero(folder: str) -> dict:
    """ZeRO-3 on this world: the same flat-range boxes as the save, for this N."""
    N = dist.get_world_size()
    module, optimizer = zero.shard(GPT(CFG).to(DTYPE), torch.optim.Adam, 3, lr=LR)
    names = {id(p): name for name, p in module.named_parameters()}
    targets = {}
    for piece in optimizer.pieces:
        name, shape = names[id(piece.param)], tuple(piece.param.shape)
        adam = {key: torch.zeros_like(piece.chunk) for key in STATE}
        adam["step"] = torch.zeros(())
        optimizer.inner.state[piece.chunk] = adam
        targets[f"model.{name}"] = zero_tensor(piece.chunk.data, shape, N)
        for key in STATE:
            targets[f"optim.{name}.{key}"] = zero_tensor(adam[key], shape, N)
        targets[f"optim.{name}.step"] = adam["step"]
    planner = ReadRecorder()
    with quiet():
        dcp.load(targets, checkpoint_id=folder, planner=planner)
    for unit in optimizer.units:  # the chunks changed under the freed parameters
        unit.free()
    return {"state": gather_zero(module, optimizer), "read": planner.read}


def load_one(folder: str) -> dict:
    """One process, no group: every tensor whole."""
    model = GPT(CFG).to(DTYPE)
    asked = mesh_targets(model, None)
    planner = ReadRecorder()
    with quiet():
        dcp.load(asked["targets"], checkpoint_id=folder, planner=planner, no_dist=True)
    return {"state": full_of(model, asked["optimizer"], {}), "read": planner.read}


class ReadRecorder(DefaultLoadPlanner):
    """DCP's own load planner, keeping which saved file each read comes from."""

    def create_local_plan(self):
        plan = super().create_local_plan()
        files = self.metadata.storage_data
        self.read = sorted(
            {files[item.storage_index].relative_path for item in plan.items}
        )
        return plan


# --8<-- [start:parse]
def parse_layout(text: str) -> dict:
    """A layout by name: ``one``, ``zeroN``, or ``dpA``, ``ppB``, ``tpC`` in that
    order, each optional (``dp2tp2``, ``pp2``); one line unless it fits the model."""
    if text == "one":
        return {"kind": "one", "ranks": 1}
    if m := re.fullmatch(r"zero(\d+)", text):
        ranks = int(m[1])
        check_ranks(text, ranks)
        return {"kind": "zero", "ranks": ranks}
    m = re.fullmatch(r"(?:dp(\d+))?(?:pp(\d+))?(?:tp(\d+))?", text)
    if not text or not m:
        raise UsageError(
            f"unknown layout {text!r}: use one, zeroN, or dpA, ppB, tpC in that "
            "order (dp2tp2, pp2)"
        )
    dp, pp, tp = (int(g) if g else 1 for g in m.groups())
    check_ranks(text, dp * pp * tp)
    heads, hidden, V = CFG.n_head, 4 * CFG.n_embd, CFG.vocab_size
    for what, n in (("heads", heads), ("MLP columns", hidden), ("vocabulary rows", V)):
        if n % tp:
            raise UsageError(
                f"layout {text}: tp={tp} does not divide the checkpoint's {n} {what}; "
                f"use a tp that divides {math.gcd(heads, hidden, V)}"
            )
    if pp > CFG.n_layer:
        raise UsageError(
            f"layout {text}: pp={pp} stages but the checkpoint has {CFG.n_layer} "
            f"blocks; use pp of at most {CFG.n_layer}"
        )
    return {"kind": "mesh", "ranks": dp * pp * tp, "dp": dp, "pp": pp, "tp": tp}


def check_ranks(text: str, ranks: int) -> None:
    if not 1 <= ranks <= MAX_RANKS:
        raise UsageError(
            f"layout {text} needs {ranks} ranks; use between 1 and {MAX_RANKS}"
        )


def config_text(cfg: GPTConfig = CFG) -> str:
    return json.dumps(asdict(cfg), sort_keys=True)


def expected_shapes() -> dict[str, tuple]:
    shapes = {}
    for name, p in GPT(CFG).named_parameters():
        shapes[f"model.{name}"] = tuple(p.shape)
        shapes |= {f"optim.{name}.{key}": tuple(p.shape) for key in STATE}
        shapes[f"optim.{name}.step"] = ()
    return shapes


def check_checkpoint(folder: str) -> None:
    """One line unless ``folder`` holds a checkpoint of this model, saved here."""
    path = Path(folder)
    if not path.is_dir():
        raise UsageError(f"no checkpoint folder {folder}: pass one --save wrote")
    try:
        meta = dcp.FileSystemReader(folder).read_metadata()
    except (OSError, ValueError, EOFError):
        raise UsageError(f"{folder} holds no DCP checkpoint (no readable .metadata)")
    entries = meta.state_dict_metadata
    saved = {k: tuple(m.size) for k, m in entries.items() if hasattr(m, "size")}
    want = expected_shapes()
    differ = [k for k in sorted(want.keys() & saved.keys()) if want[k] != saved[k]]
    missing, extra = sorted(want.keys() - saved.keys()), sorted(saved.keys() - want)
    if differ or missing or extra:
        why = (
            f"{differ[0]} is {saved[differ[0]]} there, {want[differ[0]]} here"
            if differ
            else f"it lacks {missing[0]} and {len(missing) - 1} more"
            if missing
            else f"it has {extra[0]}, which this model has not"
        )
        raise UsageError(f"the checkpoint in {folder} is from another model: {why}")
    if "config" in entries:  # same shapes, other heads: only the config tells
        found = {"config": ""}
        with quiet():
            dcp.load(found, checkpoint_id=folder, no_dist=True)
        if found["config"] != config_text():
            raise UsageError(
                f"the checkpoint in {folder} is from another model: its config is "
                f"{found['config']}"
            )
    if not (path / REFERENCE).is_file():
        raise UsageError(f"{folder} has no {REFERENCE}: pass a folder --save wrote")


# --8<-- [end:parse]


def load(folder: str, layout: dict) -> list[dict]:
    """Load ``folder`` under ``layout``; each rank's state and the files it read."""
    if layout["kind"] == "one":
        return [load_one(folder)]
    fn, args = load_zero, (folder,)
    if layout["kind"] == "mesh":
        fn, args = load_mesh, (folder, layout["dp"], layout["pp"], layout["tp"])
    return launch(fn, layout["ranks"], backend="gloo", timeout_s=TIMEOUT_S, args=args)


def compare(ranks: list[dict], reference: dict, name: str) -> dict:
    """Every rank's assembled state against the reference, key by key, torch.equal;
    the union over the ranks must be the whole state (a pipeline splits it)."""
    seen, unequal = set(), []
    for r, loaded in enumerate(ranks):
        for key, value in loaded["state"].items():
            seen.add(key)
            if not torch.equal(value, reference[key]):
                unequal.append(f"rank {r} {key}")
    missing = sorted(reference.keys() - seen)
    law(not unequal and not missing, (name, unequal[:3], missing[:3]))
    return {"compared": len(seen), "read": [len(r["read"]) for r in ranks]}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--save", metavar="DIR", help="keep the checkpoint in DIR")
    parser.add_argument(
        "--load",
        dest="load_from",
        metavar="DIR",
        help="load this checkpoint (one --save wrote) instead of training one",
    )
    parser.add_argument(
        "--layout",
        action="append",
        help=f"one, zeroN, or dpA ppB tpC as dp2tp2 (default: {', '.join(LAYOUTS)})",
    )


def main(
    save: str | None = None,
    load_from: str | None = None,
    layout: list[str] | None = None,
) -> dict:
    if save and load_from:
        raise UsageError("pass --save or --load, not both")
    if load_from:
        check_checkpoint(load_from)
    layouts = {name: parse_layout(name) for name in layout or LAYOUTS}
    if save and Path(save).exists() and any(Path(save).iterdir()):
        raise UsageError(f"--save {save}: the folder is not empty; name a new one")
    with tempfile.TemporaryDirectory(prefix="commonplace-dcp-") as scratch:
        folder = load_from or save or scratch
        if load_from:
            reference = torch.load(os.path.join(folder, REFERENCE))
        else:
            reference = launch(
                save_zero3,
                SAVE_RANKS,
                backend="gloo",
                timeout_s=TIMEOUT_S,
                args=(folder,),
            )[0]
        oracle = train_one_process()
        drift = max_difference(reference, oracle)
        law(drift < 1e-12, f"ZeRO-3 vs one process: {drift:.1e}")
        rows = []
        for name, lay in layouts.items():
            found = compare(load(folder, lay), reference, name)
            rows.append(
                {
                    "layout": name,
                    "ranks": lay["ranks"],
                    "tensors equal (torch.equal)": found["compared"],
                    "files each rank read": " ".join(map(str, found["read"])),
                }
            )
        disk = on_disk(folder)
        pieces = chunks_of(folder, "model.blocks.0.attn.q.weight")
    print(
        f"tiny GPT d={CFG.n_embd}, ZeRO-3 Adam on {SAVE_RANKS} ranks, {STEPS} steps, "
        f"saved with torch.distributed.checkpoint: {len(disk)} files, "
        f"{sum(f['bytes'] for f in disk):,} bytes"
    )
    for r in rows:
        print(
            f"{r['layout']:>7} on {r['ranks']} rank(s): "
            f"{r['tensors equal (torch.equal)']} tensors equal the state gathered "
            "before the save ✓"
        )
    print(f"gathered state vs one process trained alike: max |Δ| = {drift:.1e} ✓")
    said = check(CLAIMS, {"disk": disk})
    print(*said)
    return {
        "tables": {"layouts": rows, "disk": disk, "chunks": pieces},
        "markdown": {"claims": " ".join(said)},
        "drift": drift,
        "provenance": {"backend": "gloo", "world_size": SAVE_RANKS},
    }


# --8<-- [start:disk]
def on_disk(folder: str) -> list[dict]:
    """Every file DCP wrote: who wrote it (``__R_i.distcp``: rank R; ``.metadata``:
    the coordinator, rank 0), its size, the chunks in it and their raw bytes."""
    meta = dcp.FileSystemReader(folder).read_metadata()
    per_file: dict[str, dict] = {}
    for index, info in meta.storage_data.items():
        row = per_file.setdefault(
            info.relative_path, {"chunks": 0, "optimizer chunks": 0, "raw bytes": 0}
        )
        row["chunks"] += 1
        row["optimizer chunks"] += index.fqn.startswith("optim.")
        md = meta.state_dict_metadata[index.fqn]
        if index.offset is not None:
            chunk = next(c for c in md.chunks if c.offsets == index.offset)
            row["raw bytes"] += math.prod(chunk.sizes) * md.properties.dtype.itemsize
    rows = [{"file": ".metadata", "written by": "rank 0 (coordinator)"}]
    rows[0] |= {"bytes": os.path.getsize(os.path.join(folder, ".metadata"))}
    for name in sorted(per_file):
        rank = int(re.match(r"__(\d+)_", name)[1])
        size = os.path.getsize(os.path.join(folder, name))
        rows.append(
            {
                "file": name,
                "written by": f"rank {rank}",
                "bytes": size,
                **per_file[name],
            }
        )
    return rows


def chunks_of(folder: str, fqn: str) -> list[dict]:
    """The boxes one tensor was saved as: file, offsets, sizes."""
    meta = dcp.FileSystemReader(folder).read_metadata()
    rows = []
    for index, info in meta.storage_data.items():
        if index.fqn == fqn:
            md = meta.state_dict_metadata[fqn]
            chunk = next(c for c in md.chunks if c.offsets == index.offset)
            rows.append(
                {
                    "file": info.relative_path,
                    "offsets (row, col)": tuple(chunk.offsets),
                    "sizes (rows, cols)": tuple(chunk.sizes),
                    "values": math.prod(chunk.sizes),
                }
            )
    return rows


# --8<-- [end:disk]


CLAIMS = [
    Law(
        "Each rank's file is more than twice the raw bytes of the values in it: DCP "
        "writes every chunk with torch.save, and this model has many small chunks.",
        lambda d: all(r["bytes"] > 2 * r["raw bytes"] for r in d["disk"][1:]),
    ),
]


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
