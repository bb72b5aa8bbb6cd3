"""A parsed ``nvidia-smi topo -m`` drawn as a mermaid flowchart.

GPUs are boxed by NUMA node and links coloured by kind: green NVLink (thicker for more
links), blue PCIe switch, purple host bridge, orange within a NUMA node, dashed red
across sockets. GPU pairs across NUMA boxes are left out (the boxes say it), and each
NIC is drawn to its nearest GPUs only, or the picture is a hairball. :func:`graph`
draws the GPUs as an interactive chart: every pair, the best ring, GB/s on hover.
"""

from __future__ import annotations

import math
import re

from snippets.core.charts import link_graph
from snippets.hardware.topology_legend import NEAREST_FIRST, closeness, link_kind
from snippets.hardware.topology_parser import Topology

STYLE = {
    "nvlink": "stroke:#2ca02c",
    "pcie-switch": "stroke:#1f77b4,stroke-width:2px",
    "host-bridge": "stroke:#9467bd,stroke-width:2px",
    "numa-node": "stroke:#ff7f0e,stroke-width:2px",
    "cross-socket": "stroke:#d62728,stroke-width:1px,stroke-dasharray:4 3",
    "other": "stroke:#7f7f7f",
}


def _boxed(numa: str | None) -> bool:
    return numa not in (None, "N/A")


def mermaid(topo: Topology) -> str:
    """The flowchart as a Markdown fence (```mermaid … ```)."""
    out = ["```mermaid", "flowchart LR"]
    for numa in dict.fromkeys(d.numa_affinity for d in topo.gpus):
        members = [f"  {d.name}" for d in topo.gpus if d.numa_affinity == numa]
        if _boxed(numa):
            box = re.sub(r"[^0-9A-Za-z]", "_", numa)
            members = [f'  subgraph numa_{box}["NUMA {numa}"]', *members, "  end"]
        out += members
    g = [topo.index(d.name) for d in topo.gpus]
    numa = [topo.devices[a].numa_affinity for a in g]

    def apart(i: int, j: int) -> bool:  # the boxes already say "across sockets"
        return _boxed(numa[i]) and _boxed(numa[j]) and numa[i] != numa[j]

    edges = [
        (a, b)
        for i, a in enumerate(g)
        for j, b in enumerate(g)
        if i < j
        and not (link_kind(topo.matrix[a][b]) == "cross-socket" and apart(i, j))
    ]
    for x in (topo.index(d.name) for d in topo.nics):
        near = min(closeness(topo.matrix[x][a]) for a in g)
        edges += [(a, x) for a in g if closeness(topo.matrix[x][a]) == near]
        nic = topo.devices[x]
        out.append(f'  {nic.name}(["{nic.alias or nic.name}"])')
    names = [d.name for d in topo.devices]
    out += [f"  {names[a]} ---|{topo.matrix[a][b]}| {names[b]}" for a, b in edges]
    for i, code in enumerate(topo.matrix[a][b] for a, b in edges):
        kind = link_kind(code)
        width = (
            f",stroke-width:{min(2 + int(code[2:]), 8)}px" if kind == "nvlink" else ""
        )
        out.append(f"  linkStyle {i} {STYLE[kind]}{width}")
    return "\n".join(out + ["```"])


def graph(topo: Topology, w: list[list[float]], ring: list[int]) -> dict:
    """The GPUs round a circle, every pair's link coloured by kind with its nominal
    GB/s (``w``) on hover, and the best ring (GPU indices) drawn wide under them."""
    gpus = topo.gpus
    n = len(gpus)
    nodes = [
        {"name": d.name, "x": round(math.sin(2 * math.pi * i / n), 4),
         "y": round(math.cos(2 * math.pi * i / n), 4), "NUMA": d.numa_affinity or "-",
         "CPUs": d.cpu_affinity or "-"}
        for i, d in enumerate(gpus)
    ]  # fmt: skip
    links = [
        {"from": gpus[i].name, "to": gpus[j].name, "link": code,
         "kind": link_kind(code), "GB/s": w[i][j]}
        for i in range(n) for j in range(i + 1, n)
        for code in [topo.link(gpus[i].name, gpus[j].name)]
    ]  # fmt: skip
    order = " → ".join(gpus[g].name[3:] for g in ring + ring[:1])
    return link_graph(
        nodes, links, [gpus[g].name for g in ring],
        title=f"Links by kind, and the best ring: GPU {order}",
        kinds=[k for k in NEAREST_FIRST if k in {e["kind"] for e in links}],
        path_label="best ring",
        description="Every GPU pair's link, coloured by its kind; hover a link for "
        "its nominal bandwidth. The wide faint path is the best ring.",
    )  # fmt: skip
