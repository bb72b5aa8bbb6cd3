"""Which parallelism, when: the sizing calculator on the configurations a choice
between DP, ZeRO, TP, PP and CP turns on, for the decision guide (``docs/guide.md``).

Each row is one ``python -m snippets size`` command (its flags are in :data:`SETUPS`
and in the row's JSON), run through the same ``estimate()`` the command prints; the
page shows the memory on the most loaded GPU, the bytes each parallelism sends a
step and the calculator's step time. The claims the guide makes in prose (what
fits, which traffic is largest, what sharding costs) are checked in :func:`main`, so
a calculator that contradicts them fails ``run-all``.

    python -m snippets run parallelism_guide
"""

from __future__ import annotations

import textwrap

from snippets.core.claims import law
from snippets.core.cli import main_entry
from snippets.core.runtime import Spec, print0
from snippets.sizing import estimate, presets

SPEC = Spec(summary="which parallelism, when: DP, ZeRO, TP, PP, CP by the calculator")

GPU = "h100-sxm"

# --8<-- [start:setups]
# Every row: H100 80 GB, bf16 weights, fp32 gradients and Adam (18 bytes a
# parameter), selective recompute, 64 sequences a step; SP on wherever tp > 1.
COMMON = {"gpu": GPU, "micro_batch": 1, "global_batch": 64, "recompute": "selective"}
SETUPS = {
    "7b": (  # Llama 2 7B, s = 4096, one node of 8 GPUs
        ("llama2-7b", {"seq": 4096}),
        [
            ("DP", {"dp": 8}),
            ("ZeRO-1", {"dp": 8, "zero": 1}),
            ("ZeRO-2", {"dp": 8, "zero": 2}),
            ("ZeRO-3", {"dp": 8, "zero": 3}),
            ("TP 8", {"tp": 8}),
            ("PP 8", {"pp": 8}),
            ("TP 2 × ZeRO-1 4", {"tp": 2, "dp": 4, "zero": 1}),
        ],
    ),
    "70b": (  # Llama 3 70B, s = 4096, 8 nodes of 8 GPUs
        ("llama3-70b", {"seq": 4096}),
        [
            ("ZeRO-1 64", {"dp": 64, "zero": 1}),
            ("ZeRO-3 64", {"dp": 64, "zero": 3}),
            ("ZeRO-3 64, full recompute", {"dp": 64, "zero": 3, "recompute": "full"}),
            ("TP 8 × ZeRO-1 8", {"tp": 8, "dp": 8, "zero": 1}),
            ("TP 8 × PP 8", {"tp": 8, "pp": 8}),
            ("TP 8 × PP 4 × ZeRO-1 2", {"tp": 8, "pp": 4, "dp": 2, "zero": 1}),
        ],
    ),
    "long": (  # Llama 3 70B, s = 32768, 8 nodes of 8 GPUs
        ("llama3-70b", {"seq": 32768}),
        [
            ("TP 8 × PP 8", {"tp": 8, "pp": 8}),
            ("TP 8 × PP 4 × CP 2", {"tp": 8, "pp": 4, "cp": 2, "zero": 1}),
            ("TP 8 × PP 2 × CP 4", {"tp": 8, "pp": 2, "cp": 4, "zero": 1}),
        ],
    ),
}
# --8<-- [end:setups]

KINDS = ("dp", "tp", "pp", "cp")


def setup(model: dict, grid: dict) -> dict:
    """The keyword arguments of ``estimate()`` for one row (as the CLI builds them)."""
    found = {k: v for k, v in COMMON.items() if k != "gpu"} | model | grid
    found["sequence_parallel"] = found.get("tp", 1) > 1
    return found


def command(preset: str, kwargs: dict) -> str:
    """The row as the command a reader can run."""
    flags = [f"--preset {preset}", f"--gpu {GPU}"]
    for key, value in kwargs.items():
        if key == "sequence_parallel":
            flags += ["--sequence-parallel"] if value else []
        elif not (key == "micro_batch" and value == 1):
            flags.append(f"--{key.replace('_', '-')} {value}")
    return "python -m snippets size " + " ".join(flags)


def row(label: str, preset: str, kwargs: dict) -> dict:
    r = estimate.estimate(presets.MODELS[preset], presets.GPUS[GPU], **kwargs)
    mem, sent = r["memory_bytes"], r["comm_bytes_per_step"]
    cells = {
        "setup": label,
        "GPUs": r["inputs"]["gpus"],
        "states GB": round(
            (mem["weights"] + mem["gradients"] + mem["optimizer"]) / 1e9, 1
        ),
        "activations GB": round(mem["activations"] / 1e9, 1),
        "total GB": round(mem["total"] / 1e9, 1),
        "fits 80 GB": "yes" if r["fits"] else "no",
    }
    cells |= {f"{k.upper()} GB sent": round(sent[k] / 1e9, 1) for k in KINDS}
    cells |= {"step s": round(r["step_time_s"], 2), "MFU": f"{r['mfu']:.0%}"}
    return cells


def tables() -> tuple[dict, dict]:
    """(table name → rows, table name → the rows' commands and their arguments)."""
    out, runs = {}, {}
    for name, ((preset, model), grids) in SETUPS.items():
        out[name], runs[name] = [], []
        for label, grid in grids:
            kwargs = setup(model, grid)
            out[name].append(row(label, preset, kwargs))
            runs[name].append(
                {"setup": label, "preset": preset, "kwargs": kwargs,
                 "command": command(preset, kwargs)}
            )  # fmt: skip
    for name, rows in out.items():  # a column of zeros says nothing: leave it out
        empty = [
            c for c in rows[0] if c.endswith("sent") and not any(r[c] for r in rows)
        ]
        out[name] = [{k: v for k, v in r.items() if k not in empty} for r in rows]
    return out, runs


def by_setup(rows: list[dict]) -> dict[str, dict]:
    return {r["setup"]: r for r in rows}


def check_claims(t: dict) -> None:
    """What docs/guide.md says in words, held to the numbers. Every one is a law: the
    rows are the calculator's formulas, the same on any machine."""
    s, b, long = by_setup(t["7b"]), by_setup(t["70b"]), by_setup(t["long"])
    law(
        s["DP"]["fits 80 GB"] == "no" and s["ZeRO-1"]["fits 80 GB"] == "yes",
        "7B: plain DP does not fit 80 GB, ZeRO-1 does",
    )
    law(
        s["ZeRO-1"]["DP GB sent"] < s["DP"]["DP GB sent"],
        "7B: ZeRO-1 sends less than DP",
    )
    # ZeRO-2 and -3 shard more but send more under gradient accumulation
    law(
        s["ZeRO-1"]["DP GB sent"]
        < s["ZeRO-2"]["DP GB sent"]
        < s["ZeRO-3"]["DP GB sent"],
        "7B: each ZeRO stage above 1 sends more than the one below it",
    )
    law(
        s["ZeRO-3"]["total GB"] < s["ZeRO-2"]["total GB"] < s["ZeRO-1"]["total GB"],
        "7B: each ZeRO stage keeps less than the one below it",
    )
    sent = {
        r["setup"]: sum(v for k, v in r.items() if k.endswith("sent")) for r in t["7b"]
    }
    law(
        max(t["7b"], key=lambda r: r["TP GB sent"])["setup"] == "TP 8",
        "7B: TP 8 sends the most TP bytes",
    )
    law(min(sent, key=sent.get) == "PP 8", f"7B: PP 8 sends the fewest bytes: {sent}")
    law(
        b["ZeRO-1 64"]["fits 80 GB"] == b["ZeRO-3 64"]["fits 80 GB"] == "no",
        "70B: neither ZeRO-1 nor ZeRO-3 on 64 GPUs fits",
    )
    law(
        b["ZeRO-3 64"]["activations GB"] > 80,
        "70B: ZeRO-3's activations alone are over 80 GB",
    )
    law(
        b["ZeRO-3 64, full recompute"]["fits 80 GB"] == "yes",
        "70B: ZeRO-3 with full recompute fits",
    )
    law(
        b["TP 8 × ZeRO-1 8"]["fits 80 GB"] == b["TP 8 × PP 8"]["fits 80 GB"] == "yes",
        "70B: TP 8 × ZeRO-1 8 and TP 8 × PP 8 fit",
    )
    tp = [r["step s"] for r in t["70b"] if r["setup"].startswith("TP")]
    law(
        max(tp) < min(r["step s"] for r in t["70b"] if r["step s"] not in tp),
        "70B: every row with TP has a shorter step than every row without",
    )
    law(
        long["TP 8 × PP 8"]["activations GB"] > 80,
        "long: TP 8 × PP 8 keeps over 80 GB of activations",
    )
    law(
        long["TP 8 × PP 4 × CP 2"]["fits 80 GB"] == "yes",
        "long: TP 8 × PP 4 × CP 2 fits",
    )
    cp2, cp4 = long["TP 8 × PP 4 × CP 2"], long["TP 8 × PP 2 × CP 4"]
    law(
        cp4["activations GB"]
        < cp2["activations GB"]
        < long["TP 8 × PP 8"]["activations GB"],
        "long: more CP keeps fewer activations",
    )


def commands_markdown(runs: dict) -> str:
    """Every command, wrapped with shell continuations so a line fits 88 columns."""
    lines = ["```sh"]
    for name, found in runs.items():
        for r in found:
            wrapped = textwrap.wrap(r["command"], 80, break_on_hyphens=False,
                                    subsequent_indent="    ")  # fmt: skip
            lines += [f"# {r['setup']}", " \\\n".join(wrapped)]
    return "\n".join(lines + ["```"])


def main() -> dict:
    t, runs = tables()
    check_claims(t)
    for name, rows in t.items():
        fits = [r["setup"] for r in rows if r["fits 80 GB"] == "yes"]
        print0(
            f"{name}: {len(fits)} of {len(rows)} setups fit 80 GB: {', '.join(fits)}"
        )
    print0("the guide's claims hold against the calculator ✓")
    return {
        "tables": t,
        "runs": runs,
        "markdown": {"commands": commands_markdown(runs)},
    }


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
