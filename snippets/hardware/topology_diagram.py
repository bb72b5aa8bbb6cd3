"""A parsed ``nvidia-smi topo -m`` drawn: :func:`graph` puts the GPUs round a circle
as an interactive chart, every pair's link coloured by its kind with its GB/s on
hover, and the best ring under them.
"""

from __future__ import annotations

import math

from snippets.core.charts import link_graph
from snippets.hardware.topology_legend import NEAREST_FIRST, link_kind
from snippets.hardware.topology_parser import Topology


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
