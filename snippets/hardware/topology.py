"""Reading ``nvidia-smi topo -m``: which GPUs talk fast, which ring to use, what groups.

It reads this machine's matrix (or ``--file``), then works through one example that
is worth explaining, a sample 8×V100 hybrid cube-mesh: the best ring found by search
and checked by brute force, the tensor-parallel groups, the affinity, a chart. The
pieces: ``topology_parser`` (text → :class:`Topology`), ``topology_legend`` (what a
code means), ``topology_model`` (what a link is worth), ``topology_diagram``.

    python -m snippets run topology                 # this machine, then the sample
    python -m snippets run topology --file topo.txt # a saved output instead of both
"""

from __future__ import annotations

import argparse
import functools
import itertools
import shutil
import subprocess
import textwrap
from collections.abc import Callable
from pathlib import Path

from snippets.core.claims import law
from snippets.core.cli import main_entry, positive_int
from snippets.core.parts import Excerpt
from snippets.core.runtime import Spec, UsageError, print0
from snippets.hardware.topology_diagram import graph
from snippets.hardware.topology_legend import closeness, link_kind
from snippets.hardware.topology_model import (
    best_ring,
    brute_force_ring_key,
    link_bandwidth,
    predicted_busbw,
    ring_links,
    tp_groups,
)
from snippets.hardware.topology_parser import Topology, TopologyError, parse_topology

__all__ = ["SPEC", "Topology", "TopologyError", "main", "parse_topology"]

SPEC = Spec(
    summary="parse nvidia-smi topo -m: links, affinity, best ring, TP groups, chart",
    gpu_path=True,
)
WIDTH = 88  # what a note's code block holds

# A shape worth explaining: 8×V100 in a hybrid cube-mesh like a DGX-1 (written for this
# note in the documented format, with single spaces where nvidia-smi prints tabs; not
# captured from a machine). Each GPU has 6 NVLinks split NV1/NV2 over four peers; the
# other three pairs cross the sockets.
SAMPLE = """\
      GPU0  GPU1  GPU2  GPU3  GPU4  GPU5  GPU6  GPU7  CPU Affinity  NUMA Affinity
GPU0   X    NV1   NV1   NV2   NV2   SYS   SYS   SYS   0-19,40-59    0
GPU1  NV1    X    NV2   NV1   SYS   NV2   SYS   SYS   0-19,40-59    0
GPU2  NV1   NV2    X    NV2   SYS   SYS   NV1   SYS   0-19,40-59    0
GPU3  NV2   NV1   NV2    X    SYS   SYS   SYS   NV1   0-19,40-59    0
GPU4  NV2   SYS   SYS   SYS    X    NV1   NV1   NV2   20-39,60-79   1
GPU5  SYS   NV2   SYS   SYS   NV1    X    NV2   NV1   20-39,60-79   1
GPU6  SYS   SYS   NV1   SYS   NV1   NV2    X    NV2   20-39,60-79   1
GPU7  SYS   SYS   SYS   NV1   NV2   NV1   NV2    X    20-39,60-79   1
"""
SAMPLE_SOURCE = "sample: 8×V100 hybrid cube-mesh (DGX-1 shape)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--file", default=None, help="read this saved `nvidia-smi topo -m` output"
    )
    parser.add_argument(
        "--pcie-gen",
        type=positive_int,
        default=None,
        choices=(3, 4, 5),
        help="PCIe generation (default: a guess from the NVLink counts)",
    )
    parser.add_argument(
        "--nvlink-gen",
        type=positive_int,
        default=None,
        choices=(1, 2, 3, 4, 5),
        help="NVLink generation (default: a guess from the NVLink counts)",
    )


def say(text: str, indent: str = "", out: Callable[[str], None] = print0) -> None:
    """Print wrapped to the width of a note's code block (with ``out``: an
    ``Excerpt`` keeps what it prints)."""
    more = indent + "    "
    out(textwrap.fill(text, WIDTH, initial_indent=indent, subsequent_indent=more))


def guess_generations(topo: Topology) -> tuple[int, int]:
    """(PCIe, NVLink) generation, guessed from the most NVLinks any pair has: only
    Hopper has more than 12 per GPU (NVLink 4 with PCIe 5), only Ampere more than 6
    (NVLink 3, PCIe 4); fewer, and it is a V100-era box (NVLink 2, PCIe 3). No NVLink:
    PCIe 4."""
    most = max(
        (int(c[2:]) for row in topo.matrix for c in row if link_kind(c) == "nvlink"),
        default=0,
    )
    return (5, 4) if most > 12 else (4, 3) if most > 6 or most == 0 else (3, 2)


def gpu_bandwidths(topo: Topology, p: int, v: int) -> list[list[float]]:
    """GPU×GPU nominal GB/s per direction (0 on the diagonal) for PCIe ``p``.0 and
    NVLink ``v``: the matrix the model works on."""
    g = [topo.index(d.name) for d in topo.gpus]
    bandwidth = functools.partial(link_bandwidth, pcie_gen=p, nvlink_gen=v)
    return [[0.0 if i == j else bandwidth(topo.matrix[i][j]) for j in g] for i in g]


def machine_matrix() -> tuple[str | None, str]:
    """(text or None, what happened): this machine's ``nvidia-smi topo -m``."""
    if not shutil.which("nvidia-smi"):
        return None, "no nvidia-smi (--file PATH reads a saved `nvidia-smi topo -m`)"
    try:
        run = subprocess.run(
            ["nvidia-smi", "topo", "-m"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"`nvidia-smi topo -m` failed: {exc}"
    if run.returncode != 0 or "GPU0" not in run.stdout:
        return None, f"`nvidia-smi topo -m` gave no matrix (exit {run.returncode})"
    return run.stdout, "this machine's `nvidia-smi topo -m`"


def nearest_nics(topo: Topology, gpu: str) -> str:
    """The NICs fewest bridges away, unless that means crossing sockets."""
    near = min((closeness(topo.link(gpu, x.name)) for x in topo.nics), default=None)
    return (
        ", ".join(
            x.alias or x.name
            for x in topo.nics
            if closeness(topo.link(gpu, x.name)) == near
            and link_kind(topo.link(gpu, x.name)) != "cross-socket"
        )
        or "-"
    )


def explain(
    topo: Topology,
    source: str,
    gens: tuple[int | None, int | None],
    out: Callable[[str], None] = print0,
) -> dict:
    """Print what the matrix says and return it as data: pairs, affinity, ring, TP
    (``out`` prints all but the TP groups, which the note shows as a table)."""
    gpus, n, guessed = topo.gpus, len(topo.gpus), guess_generations(topo)
    pcie_gen, nvlink_gen = gens[0] or guessed[0], gens[1] or guessed[1]
    say(f"{source}: {n} GPU(s), {len(topo.nics)} NIC(s)", out=out)
    pairs = [
        {"pair": f"{a.name}-{b.name}", "link": code, "kind": link_kind(code)}
        for a, b in itertools.combinations(gpus, 2)
        for code in [topo.link(a.name, b.name)]
    ]
    affinity = [
        {
            "gpu": d.name,
            "CPU affinity": d.cpu_affinity or "-",
            "NUMA": d.numa_affinity or "-",
            "nearest NIC": nearest_nics(topo, d.name),
        }
        for d in gpus
    ]
    for row in affinity:
        say(
            f"{row['gpu']}: CPUs {row['CPU affinity']}, NUMA {row['NUMA']}, "
            f"nearest NIC {row['nearest NIC']}",
            indent="  ",
            out=out,
        )
    result: dict = {
        "source": source,
        "gpus": n,
        "nics": len(topo.nics),
        "tables": {"pairs": pairs, "affinity": affinity, "tp_groups": []},
    }
    if not 2 <= n <= 10:
        why = "no peers" if n < 2 else "too many for the brute-force search (max 10)"
        say(f"{n} GPU(s): {why}, so no ring and no groups to choose", "  ", out)
        return result
    try:
        w = gpu_bandwidths(topo, pcie_gen, nvlink_gen)  # [n, n] GB/s per direction
    except ValueError as exc:  # a code newer than the model, accepted from the legend
        say(f"no ring: {exc}", indent="  ", out=out)
        return result
    assumed = f"PCIe {pcie_gen}.0, NVLink {nvlink_gen} assumed"
    say(f"{assumed} (--pcie-gen, --nvlink-gen)", out=out)
    for row, (i, j) in zip(pairs, itertools.combinations(range(n), 2)):
        row["GB/s"] = w[i][j]
    ring = best_ring(w)
    for name, order in (("naive ring", list(range(n))), ("best ring", ring)):
        hops = ring_links(order, w)
        path = " → ".join(gpus[g].name[3:] for g in order + order[:1])
        say(f"{name:>10}: GPU {path}", indent="  ", out=out)
        say(
            f"slowest hop {min(hops):g} GB/s → predicted all-reduce busbw "
            f"{predicted_busbw(w, order):g} GB/s",
            indent=" " * 14,
            out=out,
        )
    hops = ring_links(ring, w)
    if n <= 8:  # the oracle: every one of the n! orders, no shortcuts
        law((min(hops), sum(hops)) == brute_force_ring_key(w), "missed a ring")
    law(
        abs(predicted_busbw(w, ring) - min(hops)) < 1e-9,
        "the predicted bus bandwidth is the ring's slowest hop",
    )  # busbw = slowest hop
    for size in (k for k in range(2, n) if n % k == 0):
        split = tp_groups(w, size)
        slowest = min(w[a][b] for g in split for a in g for b in g if a != b)
        groups = " | ".join(",".join(gpus[g].name[3:] for g in grp) for grp in split)
        result["tables"]["tp_groups"].append(
            {"TP size": size, "groups": groups, "slowest link inside (GB/s)": slowest}
        )
        say(f"TP={size}: {groups} (slowest link inside a group {slowest:g} GB/s)", "  ")
    result.update(ring=[gpus[g].name for g in ring], busbw_gbps=min(hops))
    result["figures"] = {"graph": graph(topo, w, ring)}
    return result


def check_sample(topo: Topology, result: dict) -> None:
    """What the note says about the sample, held to the numbers."""
    ring = result["ring"]
    hops = {topo.link(a, b) for a, b in zip(ring, ring[1:] + ring[:1])}
    law(topo.link("GPU3", "GPU4") == "SYS" and hops == {"NV2"}, ring)
    law(
        result["tables"]["tp_groups"][1]["groups"] == "0,1,2,3 | 4,5,6,7",
        "the TP groups of 4 keep each socket's GPUs together",
    )


def main(
    file: str | None = None, pcie_gen: int | None = None, nvlink_gen: int | None = None
) -> dict:
    gens = (pcie_gen, nvlink_gen)
    if file is not None:  # a saved output, and nothing else
        try:
            text = Path(file).read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise UsageError(
                f"cannot read --file {file}: {exc.strerror or exc}"
            ) from None
        try:
            topo = parse_topology(text)
        except TopologyError as exc:
            raise UsageError(f"{file}: {exc}") from None
        return explain(topo, file, gens)
    text, source = machine_matrix()
    machine = None
    said = Excerpt()  # what the note shows: this machine, the sample and its rings
    if text is None:
        say(f"this machine: {source}", out=said)
    else:  # a matrix nvidia-smi printed must parse: a TopologyError here is a bug
        machine = explain(parse_topology(text), source, gens, out=said)
    said("")
    sample = parse_topology(SAMPLE)
    result = explain(sample, SAMPLE_SOURCE, (None, None), out=said)
    check_sample(sample, result)
    result["machine"] = machine
    result["excerpts"] = {"summary": said.lines}
    return result


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
