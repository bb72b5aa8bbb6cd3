"""What the sizing note's calculator runs on, written from Python, never retyped.

The page's widget (``docs/assets/sizing/``) ports the formula modules function by
function (``formulas.js``: same names, same arguments, same order of operations) and
takes everything else from here: the model and GPU presets, the bytes of each
precision and optimizer, :data:`~snippets.sizing.estimate.DEFAULTS`, the options of
``python -m snippets size`` (flag, type, choices, default, help), so the page reads a
configuration as the CLI does and, when it cannot, puts the CLI's one line (less
"(see --help)") beside the fields it names, the limits of ``estimate`` (the most
GPUs, the least MFU shown), and the chart palette. ``main`` returns it as a part of
kind ``sizing``, which ``snippets.render`` writes as the figure the note includes from
``results/``; the table of kinds gives that page the widget's scripts and stylesheet.

    python -m snippets run sizing_widget
"""

from __future__ import annotations

import argparse
import json

from snippets.core import parts
from snippets.core.chart_style import PALETTE
from snippets.core.cli import main_entry
from snippets.core.runtime import Spec, print0
from snippets.sizing import estimate, memory, presets, size_cli

SPEC = Spec(summary="the sizing calculator's page data: presets, defaults, options")
LEFT_OUT = ("help", "list", "json")  # what a page has no use for


def options() -> list[dict]:
    """The CLI's options in its own order: how the page parses and checks a value."""
    found = []
    for action in size_cli.parser()._actions:
        if action.dest in LEFT_OUT:
            continue
        flag = isinstance(action, argparse._StoreTrueAction)
        found.append(
            {
                "flag": action.option_strings[0],
                "dest": action.dest,
                "switch": flag,  # takes no value
                "type": getattr(action.type, "__name__", None),
                "choices": None if action.choices is None else list(action.choices),
                "default": None if flag else action.default,
                "help": action.help or "",
            }
        )
    return found


def widget_data() -> dict:
    return {
        "models": presets.MODELS,
        "gpus": presets.GPUS,
        "precisions": memory.PRECISIONS,
        "optimizer_state": memory.OPTIMIZER_STATE,
        "activation_bytes": memory.ACTIVATION_BYTES,
        "defaults": estimate.DEFAULTS,
        "limits": {"max_gpus": estimate.MAX_GPUS, "mfu_shown": estimate.MFU_SHOWN},
        "shape": list(size_cli.SHAPE),
        "moe": list(size_cli.MOE),
        "options": options(),
        "palette": PALETTE,
    }


def main() -> dict:
    data = widget_data()
    text = json.dumps(data, ensure_ascii=False)  # raises unless JSON holds it all
    print0(
        f"page data: {len(data['models'])} models, {len(data['gpus'])} GPUs, "
        f"{len(data['options'])} CLI options, {len(text):,} bytes"
    )
    return {"parts": {"widget": parts.sizing(data)}}


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
