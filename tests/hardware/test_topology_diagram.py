"""The topology chart: every GPU pair, its link and bandwidth, the ring under them."""

from __future__ import annotations

from snippets.hardware.topology_parser import parse_topology


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
