"""``python -m snippets view``: any model, drawn as a page to expand, search and cut.

    python -m snippets view package.module:factory [--input-shape 1,128 |
        --example package.module:inputs] [--input-dtype auto|float32|int64]
        [--method auto|export|fx|modules] [--out DIR] [--open]
        [--dp N] [--tp N] [--pp N] [--cp N] [--zero 0-3] [--sp] [--ep N]
    python -m snippets view tiny_gpt        # ready-made: the shared GPT
    python -m snippets view tiny_moe_gpt    # ready-made: the GPT with 4 experts, top-2
    python -m snippets view llama_block     # ready-made: a Llama-style block

``factory`` is anything that returns an ``nn.Module`` when called with no arguments (a
function, a class) or a module itself. The example input is either a shape (a tensor
of zeros: int64 when the model has an ``nn.Embedding``, else float32, unless
``--input-dtype`` says) or ``package.module:inputs``, the arguments of one call: a
tensor, a tuple of them, a tuple ending in a dict of keyword arguments (``(src, tgt,
{"tgt_mask": mask})``), or a function returning one of these. The page and its
scripts go into ``--out`` (default ``model-view``); the command prints where.

The degrees (``--dp`` … ``--ep``) are the ones the page's overlay opens at, among the
choices its controls offer. Expert parallelism is folded over data parallelism, so
``--ep`` must divide ``--dp`` and the experts of each mixture, and needs a model with
experts; the command then says which EP rank holds which experts.

``torch.export`` captures the model, else ``torch.fx``; when neither can (a check on a
tensor's values, as ``nn.Transformer`` makes of a causal mask), the page draws the
model at module level from one eager call, and says so (``--method modules`` asks for
that). Bad input of any kind is one line and exit status 2.
"""

from __future__ import annotations

import argparse
import importlib
import textwrap
import webbrowser
from pathlib import Path
from typing import Any

import torch

from snippets.core.cli import OneLineParser, guarded, positive_int
from snippets.core.errors import UsageError
from snippets.render.viewer_page import summary, write_page
from snippets.viewer.graph_export import export_graph
from snippets.viewer.parallel_overlay import (
    Degrees,
    annotate,
    check_degrees,
    check_ep,
    ep_rank,
    mixtures,
)

DESCRIPTION = "Any model, drawn as a page to expand, search and cut."
READY = {
    "tiny_gpt": ("snippets.viewer.model_viewer:tiny_gpt", "1,16"),
    "tiny_moe_gpt": ("snippets.viewer.model_viewer:tiny_moe_gpt", "1,16"),
    "llama_block": ("snippets.viewer.llama_block:llama_block", "1,16,32"),
}
DTYPES = {"float32": torch.float32, "int64": torch.int64}
CHOICES = {  # the page's controls offer these (docs/assets/viewer/viewer.js)
    "dp": (1, 2, 4, 8),
    "tp": (1, 2, 4, 8),
    "pp": (1, 2, 3, 4, 8),
    "cp": (1, 2, 4),
    "zero": (0, 1, 2, 3),
    "ep": (1, 2, 4, 8),
}


def shape(text: str) -> tuple[int, ...]:
    """``1,128`` → (1, 128): each dimension a whole number ≥ 1."""
    return tuple(positive_int(part) for part in text.split(","))


def resolve(target: str) -> Any:
    """``package.module:name`` → that object, or a one-line UsageError."""
    path, colon, name = target.partition(":")
    if not colon or not path or not name:
        raise UsageError(f"{target!r}: expected package.module:name")
    try:
        module = importlib.import_module(path)
    except Exception as exc:  # noqa: BLE001 - whatever the import raised
        raise UsageError(f"cannot import {path!r}: {exc}") from None
    obj = module
    for part in name.split("."):
        if not hasattr(obj, part):
            raise UsageError(f"{path!r} has no {name!r}")
        obj = getattr(obj, part)
    return obj


def build_model(target: str) -> torch.nn.Module:
    obj = resolve(target)
    if isinstance(obj, torch.nn.Module):
        return obj
    if not callable(obj):
        raise UsageError(f"{target} is a {type(obj).__name__}, not a factory")
    try:
        model = obj()
    except Exception as exc:  # noqa: BLE001 - a user's factory may raise anything
        raise UsageError(f"{target}() failed: {type(exc).__name__}: {exc}") from None
    if not isinstance(model, torch.nn.Module):
        raise UsageError(f"{target}() returned a {type(model).__name__}, not a module")
    return model


def example_inputs(opts: argparse.Namespace, model: torch.nn.Module) -> tuple:
    """(positional arguments, keyword arguments) of the example call."""
    if opts.example:
        value = resolve(opts.example)
        value = value() if callable(value) else value
        value = (value,) if isinstance(value, torch.Tensor) else value
        if not isinstance(value, (tuple, list)):
            raise UsageError(
                f"{opts.example} gave a {type(value).__name__}, not tensors"
            )
        value = tuple(value)
        if value and isinstance(value[-1], dict):
            return value[:-1], value[-1]
        return value, {}
    dtype = DTYPES.get(opts.input_dtype)
    if dtype is None:  # auto: token ids for a model that embeds them
        embeds = any(isinstance(m, torch.nn.Embedding) for m in model.modules())
        dtype = torch.int64 if embeds else torch.float32
    return (torch.zeros(opts.input_shape, dtype=dtype),), {}


def build_parser() -> OneLineParser:
    p = OneLineParser(
        prog="python -m snippets view", description=__doc__.split("\n")[0]
    )
    p.add_argument("target", help="package.module:factory, or " + " | ".join(READY))
    given = p.add_mutually_exclusive_group()
    given.add_argument("--input-shape", type=shape, metavar="SHAPE", help="e.g. 1,128")
    given.add_argument("--example", metavar="MOD:INPUTS", help="pkg.module:inputs")
    p.add_argument("--input-dtype", choices=["auto", *DTYPES], default="auto")
    p.add_argument(
        "--method", choices=["auto", "export", "fx", "modules"], default="auto"
    )
    p.add_argument("--out", default="model-view", help="folder for the page")
    p.add_argument("--open", action="store_true", help="open it in a browser")
    for name, choices in CHOICES.items():
        p.add_argument(
            f"--{name}", type=int, choices=choices, default=choices[0], metavar="N",
            help=f"the overlay opens at this {name} ({', '.join(map(str, choices))})",
        )  # fmt: skip
    p.add_argument("--sp", action="store_true", help="and with sequence parallelism")
    return p


def placement(graph: dict, d: Degrees) -> str:
    """Which EP rank holds which experts, in one sentence."""
    found = mixtures(graph)
    parts = []
    for n in sorted({len(m["moe"]["experts"]) for m in found}):
        held = [[i for i in range(n) if ep_rank(i, n, d.ep) == r] for r in range(d.ep)]
        ranges = (f"{e[0]}-{e[-1]}" if len(e) > 1 else f"{e[0]}" for e in held)
        ranks = ", ".join(f"EP rank {r}: {x}" for r, x in enumerate(ranges))
        parts.append(f"of {n} experts, {ranks}")
    return (
        f"ep {d.ep}, folded over dp {d.dp} (EP rank = dp rank mod {d.ep}), in each "
        f"of {len(found)} mixtures: " + "; ".join(parts)
    )


def view(argv: list[str] | None = None) -> int:
    opts = build_parser().parse_args(argv)

    def body() -> int:
        target = opts.target
        if target in READY:
            target, default_shape = READY[target]
            if not opts.example and not opts.input_shape:
                opts.input_shape = shape(default_shape)
        if not opts.example and not opts.input_shape:
            raise UsageError("give an example input: --input-shape or --example")
        d = Degrees(**{k: getattr(opts, k) for k in (*CHOICES, "sp")})
        check_ep(d)  # before the export: it may take seconds
        model = build_model(target)
        args, kwargs = example_inputs(opts, model)
        graph = annotate(export_graph(model, args, opts.method, kwargs))
        check_degrees(graph, d)
        start = {k: int(v) for k, v in d.__dict__.items() if v != getattr(Degrees, k)}
        index = write_page(graph, Path(opts.out), start)
        print(textwrap.fill(summary(graph), 88))
        if d.ep > 1:
            print(textwrap.fill(placement(graph, d), 88))
        if graph.get("level") == "module":
            print(textwrap.fill(f"at module level: no tracer: {graph['why']}", 88))
        print(f"page: {index.resolve()}")
        if opts.open:
            webbrowser.open(index.resolve().as_uri())
        return 0

    return guarded(body)
