"""A parsed ``nvidia-smi topo -m`` drawn as a mermaid flowchart.

GPUs are boxed by NUMA node and links coloured by kind: green NVLink (thicker for more
links), blue PCIe switch, purple host bridge, orange within a NUMA node, dashed red
across sockets. GPU pairs across NUMA boxes are left out (the boxes say it), and each
NIC is drawn to its nearest GPUs only, or the picture is a hairball.
"""

from __future__ import annotations

import re

from snippets.hardware.topology_legend import closeness, link_kind
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
