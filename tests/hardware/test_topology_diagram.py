"""The mermaid diagram: every edge drawn is a real link, coloured by its kind."""

from __future__ import annotations

import json
import re
from pathlib import Path

from snippets.hardware.topology_diagram import mermaid
from snippets.hardware.topology_legend import link_kind
from snippets.hardware.topology_parser import parse_topology

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "topology"
COLOUR = {
    "nvlink": "#2ca02c",
    "pcie-switch": "#1f77b4",
    "host-bridge": "#9467bd",
    "numa-node": "#ff7f0e",
    "cross-socket": "#d62728",
}


def fixtures() -> list[str]:
    cases = json.loads((FIXTURES / "expected.json").read_text(encoding="utf-8"))
    return [(FIXTURES / c["file"]).read_text(encoding="utf-8") for c in cases]


def edges(text: str) -> list[tuple[str, str, str]]:
    return re.findall(r"^  (\S+) ---\|(\S+)\| (\S+)$", text, re.M)


def test_diagram_colours_links_by_kind() -> None:
    for matrix in fixtures():
        topo = parse_topology(matrix)
        text = mermaid(topo)
        assert text.startswith("```mermaid\nflowchart") and text.endswith("```")
        drawn = edges(text)
        styles = dict(re.findall(r"^  linkStyle (\d+) (.+)$", text, re.M))
        assert len(styles) == len(drawn)
        for i, (a, code, b) in enumerate(drawn):
            assert topo.link(a, b) == code
            assert COLOUR[link_kind(code)] in styles[str(i)]
        for g in topo.gpus:
            assert re.search(rf"^  {g.name}\b", text, re.M)
        for nic in topo.nics:  # each NIC drawn, to at least one GPU
            assert f'{nic.name}(["{nic.alias or nic.name}"])' in text
            assert any(nic.name in (a, b) for a, _, b in drawn)


def test_what_is_left_out() -> None:
    cube = parse_topology((FIXTURES / "dgx1_v100_cube_mesh_soc.txt").read_text())
    drawn = edges(mermaid(cube))
    # pairs across the NUMA boxes are left out (the boxes say it); the rest are drawn
    numa = {d.name: d.numa_affinity for d in cube.gpus}
    want = {
        (a.name, b.name)
        for i, a in enumerate(cube.gpus)
        for b in cube.gpus[i + 1 :]
        if link_kind(cube.link(a.name, b.name)) != "cross-socket"
        or None in (numa[a.name], numa[b.name])
        or numa[a.name] == numa[b.name]
    }
    assert {(a, b) for a, _, b in drawn} == want
    # two GPUs across sockets with no NUMA boxes to say so: the SYS link is drawn
    bare = mermaid(parse_topology("\tGPU0\tGPU1\nGPU0\t X \tSYS\nGPU1\tSYS\t X \n"))
    assert "GPU0 ---|SYS| GPU1" in bare and COLOUR["cross-socket"] in bare
    boxed = mermaid(
        parse_topology(
            "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\n"
            "GPU0\t X \tSYS\t0-7\t0\nGPU1\tSYS\t X \t8-15\t1\n"
        )
    )
    assert edges(boxed) == [] and 'subgraph numa_1["NUMA 1"]' in boxed


def test_thicker_for_more_nvlinks() -> None:
    text = mermaid(
        parse_topology(
            "\tGPU0\tGPU1\tGPU2\nGPU0\t X \tNV1\tNV12\n"
            "GPU1\tNV1\t X \tNV4\nGPU2\tNV12\tNV4\t X \n"
        )
    )
    width = [int(w) for w in re.findall(r"stroke-width:(\d+)px$", text, re.M)]
    assert width == [3, 8, 6]  # NV1, NV12 (capped at 8), NV4


def test_the_graph_draws_every_pair_with_its_bandwidth_and_the_ring() -> None:
    from snippets.hardware.topology import SAMPLE, gpu_bandwidths
    from snippets.hardware.topology_diagram import graph
    from snippets.hardware.topology_model import best_ring

    topo = parse_topology(SAMPLE)
    w = gpu_bandwidths(topo, 3, 2)
    ring = best_ring(w)
    spec = graph(topo, w, ring)
    links = {(e["from"], e["to"]): e for e in spec["data"]["values"]}
    assert len(links) == 8 * 7 // 2
    assert links[("GPU3", "GPU4")]["link"] == "SYS" == topo.link("GPU3", "GPU4")
    assert all(e["GB/s"] == w[int(a[3:])][int(b[3:])] for (a, b), e in links.items())
    at = {n["name"]: (n["x"], n["y"]) for n in spec["layer"][3]["data"]["values"]}
    hops = [(h["x"], h["y"]) for h in spec["layer"][0]["data"]["values"]]
    assert hops == [at[f"GPU{g}"] for g in ring]
