"""Capture a forward pass as an FX graph: ``torch.export`` first, ``torch.fx`` next.

``capture(model, args, method, kwargs)`` returns the graph module, the values its
placeholders take (parameters, buffers and the example input, in the graph's order),
the names of the placeholders that are real inputs, and which tracer worked. When
neither works it raises a ``CaptureError`` (a ``UsageError``) of one line: the model's
own line where tracing stopped (the last frame outside torch) and the first sentence
each tracer said; its ``why`` is that part alone. Tracers log pages
of graph code on failure; that goes to /dev/null, since the one line says it.
"""

from __future__ import annotations

import contextlib
import inspect
import io
import logging
import os
import sys
import traceback
from pathlib import Path

import torch
import torch.fx

from snippets.core.errors import UsageError

TORCH_DIR = str(Path(torch.__file__).resolve().parent)


class CaptureError(UsageError):
    """Neither tracer captured the model; ``why`` says where and what each said."""

    def __init__(self, message: str, why: str) -> None:
        super().__init__(message)
        self.why = why


def capture_export(model: torch.nn.Module, args: tuple, kwargs: dict) -> tuple:
    """torch.export: (graph module, placeholder values, names of the real inputs)."""
    ep = torch.export.export(model, args, kwargs, strict=False)
    user = iter(torch.utils._pytree.tree_leaves(ep.example_inputs))
    kinds = torch.export.graph_signature.InputKind
    values, inputs = [], []
    for spec in ep.graph_signature.input_specs:
        if spec.kind == kinds.USER_INPUT:
            values.append(next(user))
            inputs.append(spec.arg.name)
        elif spec.target in ep.state_dict:
            values.append(ep.state_dict[spec.target])
        else:
            values.append(ep.constants[spec.target])
    return ep.graph_module, values, inputs


def capture_fx(model: torch.nn.Module, args: tuple, kwargs: dict) -> tuple:
    """torch.fx; arguments the example leaves out keep their defaults (the GPT's
    ``targets=None``: traced as a proxy, it would trace the loss branch)."""
    params = list(inspect.signature(model.forward).parameters.values())[len(args) :]
    fixed = {
        p.name: p.default
        for p in params
        if p.default is not p.empty and p.name not in kwargs
    }
    gm = torch.fx.symbolic_trace(model, concrete_args=fixed or None)
    inputs = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    named = [kwargs[p.name] for p in params if p.name in kwargs]  # signature order
    return gm, [*args, *named], inputs


def model_code(filename: str) -> bool:
    """A model's own code: outside torch, or one of torch's own models in torch.nn
    (``nn.Transformer``), but not the machinery that calls a module."""
    path = str(Path(filename).resolve())
    if filename.startswith("<") or path == str(Path(__file__).resolve()):
        return False  # code that torch generates; this file
    nn = str(Path(TORCH_DIR) / "nn") + os.sep
    if path.startswith(nn):
        return not path.endswith(os.sep.join(("modules", "module.py")))
    return not path.startswith(TORCH_DIR)


def failing_line(exc: BaseException) -> str:
    """``file:line: code`` of the last frame in the model's code."""
    frames = [
        f for f in traceback.extract_tb(exc.__traceback__) if model_code(f.filename)
    ]
    if not frames:
        return "?"
    f = frames[-1]
    return f"{Path(f.filename).name}:{f.lineno}: {(f.line or '').strip()}"


@contextlib.contextmanager
def quiet_stderr():
    """A failing tracer logs pages of graph code to fd 2; the user gets one line."""
    sys.stderr.flush()
    saved, null = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 2)
    logging.disable(logging.CRITICAL)  # handlers may hold a replaced sys.stderr
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            yield
    finally:
        logging.disable(logging.NOTSET)
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


def first_line(exc: BaseException, width: int = 90) -> str:
    """The first sentence of what a tracer said, at most ``width`` characters."""
    text = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), "")
    text = (text or type(exc).__name__).split(". ")[0]
    return text if len(text) <= width else text[: width - 1] + "…"


def capture(
    model: torch.nn.Module,
    args: tuple,
    method: str = "auto",
    kwargs: dict | None = None,
) -> tuple:
    """(graph module, values, user input names, "torch.export" | "torch.fx")."""
    tried = []
    tracers = {"torch.export": capture_export, "torch.fx": capture_fx}
    for source, tracer in tracers.items():
        if method not in ("auto", source.removeprefix("torch.")):
            continue
        try:
            with quiet_stderr():
                return (*tracer(model, args, kwargs or {}), source)
        except Exception as exc:  # noqa: BLE001 - any tracer failure is reported
            tried.append((source, exc))
    where = failing_line(tried[0][1])
    said = "; ".join(f"{s}: {first_line(e)}" for s, e in tried)
    why = f"fails at {where} ({said})"
    raise CaptureError(
        f"cannot capture {type(model).__name__}: {why}; "
        "make that line traceable or pass a submodule",
        why,
    )
