"""parse_topology against real published outputs and our own fixtures; bad input; the diagram; the CLI."""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from snippets.hardware.topology import (
    SAMPLE,
    TopologyError,
    guess_generations,
    link_kind,
    main,
    mermaid,
    parse_topology,
)

REPO = Path(__file__).resolve().parents[2]
SHARED = Path(__file__).resolve().parents[3] / "shared" / "topo-samples"
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "topology"


def _expected(folder: Path) -> list[dict]:
    return json.loads((folder / "expected.json").read_text(encoding="utf-8"))


def _check_against(case: dict, text: str) -> None:
    topo = parse_topology(text)
    assert len(topo.gpus) == case["gpus"] and len(topo.nics) == case["nics"]
    for pair, code in case["pairs"].items():
        a, b = pair.split("-", 1)
        assert topo.link(a, b) == code and topo.link(b, a) == code, pair
    gpus = [d.name for d in topo.gpus]
    assert {(a, b) for a, b in itertools.combinations(gpus, 2)} <= {
        tuple(p.split("-", 1)) for p in case["pairs"]
    } | {tuple(reversed(p.split("-", 1))) for p in case["pairs"]}, (
        "expected.json must cover every GPU pair"
    )
    for d in topo.gpus:
        assert d.cpu_affinity == case["cpu_affinity"][d.name]
        if case.get("numa_affinity") is not None:
            assert d.numa_affinity == case["numa_affinity"][d.name]


@pytest.mark.skipif(
    not (SHARED / "expected.json").exists(),
    reason=f"real samples not found at {SHARED}",
)
@pytest.mark.parametrize(
    "case",
    _expected(SHARED) if (SHARED / "expected.json").exists() else [],
    ids=lambda c: c["file"],
)
def test_real_samples(case: dict) -> None:
    _check_against(case, (SHARED / case["file"]).read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", _expected(FIXTURES), ids=lambda c: c["file"])
def test_fixtures(case: dict) -> None:
    text = (FIXTURES / case["file"]).read_text(encoding="utf-8")
    _check_against(case, text)
    # the same matrix survives the ways copies mangle it
    _check_against(case, text.replace("\t", "    "))
    _check_against(case, text.replace("\n", "\r\n"))
    _check_against(case, re.sub(r"\b(NV\d+|SYS|PIX)\b", "\x1b[1;32m\\1\x1b[0m", text))


def test_fixture_shapes_cover_the_issue() -> None:
    shapes = {
        c["file"]: parse_topology((FIXTURES / c["file"]).read_text(encoding="utf-8"))
        for c in _expected(FIXTURES)
    }
    assert len(shapes) >= 6
    kinds = {
        link_kind(code) for t in shapes.values() for row in t.matrix for code in row
    }
    assert {
        "nvlink",
        "pcie-switch",
        "host-bridge",
        "numa-node",
        "cross-socket",
    } <= kinds
    h100 = shapes["h100_nv18_4nic_ansi.txt"]
    assert h100.gpus[0].extra == {"GPU NUMA ID": "N/A"} and h100.index(
        "mlx5_3"
    ) == h100.index("NIC3")


def test_extra_column_and_older_layout() -> None:
    text = (
        "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tFuture Column\n"
        "GPU0\t X \tNV4\t0-7\t0\tabc\nGPU1\tNV4\t X \t8-15\t1\tdef\n"
    )
    topo = parse_topology(text)
    assert topo.gpus[1].numa_affinity == "1" and topo.gpus[1].extra == {
        "Future Column": "def"
    }
    squeezed = parse_topology(
        "     GPU0 GPU1 CPU Affinity NUMA Affinity\nGPU0 X NV4 0-7 0\nGPU1 NV4 X 8-15 1\nNIC Legend:\n"
    )
    assert (
        squeezed.link("GPU0", "GPU1") == "NV4"
        and squeezed.gpus[1].cpu_affinity == "8-15"
    )
    assert squeezed.gpus[1].numa_affinity == "1"
    one = parse_topology("\tGPU0\tCPU Affinity\tNUMA Affinity\nGPU0\t X \t0-63\t0\n")
    assert len(one.gpus) == 1 and one.matrix == [["X"]]
    # a code the driver's own legend defines is accepted even if we have never seen it
    legend = parse_topology(
        "\tGPU0\tGPU1\nGPU0\t X \tC2C\nGPU1\tC2C\t X \n\nLegend:\n  C2C  = chip to chip\n"
    )
    assert legend.link("GPU0", "GPU1") == "C2C" and link_kind("C2C") == "other"


GOOD = "\tGPU0\tGPU1\tGPU2\tCPU Affinity\nGPU0\t X \tNV2\tPHB\t0-7\nGPU1\tNV2\t X \tPHB\t0-7\nGPU2\tPHB\tPHB\t X \t0-7\n"


@pytest.mark.parametrize(
    "text, message",
    [
        ("", r"no header line starting with GPU0"),
        ("hello\nworld\n", r"no header line"),
        (
            GOOD.replace("GPU1\tNV2\t X \tPHB\t0-7\n", ""),
            r"line 3: expected the row for GPU1, got 'GPU2'",
        ),
        (
            GOOD.replace("GPU2\tPHB\tPHB\t X \t0-7\n", ""),
            r"line 4: expected the row for GPU2, got none",
        ),
        (
            GOOD.replace("GPU1\tNV2\t X \tPHB", "GPU1\tNV2\t X \tFOO"),
            r"line 3: expected a link code .* GPU1-GPU2, got 'FOO'",
        ),
        (
            GOOD.replace("GPU1\tNV2\t X \tPHB", "GPU1\tNV2\t X \tPIX"),
            r"line 3: GPU1-GPU2 is PIX but GPU2-GPU1 is PHB",
        ),
        (
            GOOD.replace("GPU0\t X ", "GPU0\tNV2"),
            r"line 2: expected X exactly where GPU0 meets itself",
        ),
        (
            GOOD.replace("\t0-7\nGPU2", "\t0-7\t1\t2\nGPU2"),
            r"line 3: expected at most 1 values after the links",
        ),
        (
            GOOD.replace("GPU2\tPHB\tPHB\t X \t0-7\n", "GPU2\tPHB\n"),
            r"line 4: expected a link code .* got '?PHB'?|"
            r"line 4: expected 3 link codes",
        ),
        (
            GOOD + "GPU3\tPHB\tPHB\tPHB\t X\n",
            r"line 5: expected the matrix to end after GPU2",
        ),
    ],
)
def test_bad_input_names_the_line(text: str, message: str) -> None:
    with pytest.raises(TopologyError, match=message):
        parse_topology(text)
    assert issubclass(TopologyError, ValueError)
    with pytest.raises(TypeError, match="str"):
        parse_topology(GOOD.encode())


def test_diagram_colours_links_by_kind() -> None:
    for case in _expected(FIXTURES):
        topo = parse_topology((FIXTURES / case["file"]).read_text(encoding="utf-8"))
        text = mermaid(topo)
        assert text.startswith("```mermaid\nflowchart") and text.endswith("```")
        edges = re.findall(r"^  (\S+) ---\|(\S+)\| (\S+)$", text, re.M)
        styles = dict(re.findall(r"^  linkStyle (\d+) (.+)$", text, re.M))
        assert len(styles) == len(edges) > 0
        colour = {
            "nvlink": "#2ca02c",
            "pcie-switch": "#1f77b4",
            "host-bridge": "#9467bd",
            "numa-node": "#ff7f0e",
            "cross-socket": "#d62728",
        }
        for i, (a, code, b) in enumerate(edges):
            assert topo.link(a, b) == code
            assert colour[link_kind(code)] in styles[str(i)]
        for g in topo.gpus:
            assert re.search(rf"^  {g.name}\b", text, re.M)
    # two GPUs across sockets with no NUMA boxes to say so: the SYS link is drawn
    bare = mermaid(parse_topology("\tGPU0\tGPU1\nGPU0\t X \tSYS\nGPU1\tSYS\t X \n"))
    assert "GPU0 ---|SYS| GPU1" in bare and "#d62728" in bare


def test_main_on_every_fixture_and_the_sample(tmp_path: Path) -> None:
    for case in _expected(FIXTURES):
        out = main(file=str(FIXTURES / case["file"]))
        assert (
            out["gpus"] == case["gpus"] and "```mermaid" in out["markdown"]["diagram"]
        )
    dgx1 = main(file=str(FIXTURES / "dgx1_v100_cube_mesh_soc.txt"))
    assert (
        dgx1["busbw_gbps"] == 50.0
    )  # the NV2 links alone close a ring: 0-3-2-1-5-6-7-4
    mixed = main(file=str(FIXTURES / "mixed_4gpu_bridged_pairs.txt"))
    assert (
        mixed["tables"]["tp_groups"][0]["groups"] == "0,1 | 2,3"
    )  # keep each bridged pair together
    assert [r["nearest NIC"] for r in mixed["tables"]["affinity"]] == [
        "mlx5_0",
        "mlx5_0",
        "-",
        "-",
    ]
    h100 = main(file=str(FIXTURES / "h100_nv18_4nic_ansi.txt"))
    assert [r["nearest NIC"] for r in h100["tables"]["affinity"]][::2] == [
        "mlx5_0",
        "mlx5_1",
        "mlx5_2",
        "mlx5_3",
    ]
    odd = tmp_path / "c2c.txt"
    odd.write_text(
        "\tGPU0\tGPU1\nGPU0\t X \tC2C\nGPU1\tC2C\t X \n\nLegend:\n  C2C  = chip to chip\n"
    )
    assert "ring" not in main(
        file=str(odd)
    )  # parsed, but this model has no bandwidth for C2C: it says so
    sample = main()  # no nvidia-smi here: it must say so and explain the sample
    assert "sample" in sample["source"] or "nvidia-smi" in sample["source"]
    assert guess_generations(parse_topology(SAMPLE)) == (3, 2)


def test_cli_bad_file_is_one_line_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "topo.txt"
    bad.write_text("GPU0 GPU1\nnonsense\n")
    run = subprocess.run(
        [sys.executable, "-m", "snippets", "run", "topology", "--file", str(bad)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2, run.stderr
    assert (
        run.stderr.count("\n") == 1
        and "error:" in run.stderr
        and "Traceback" not in run.stderr
    )


def test_diagram_is_written_as_a_results_part(tmp_path: Path) -> None:
    from snippets.core import results as _results

    record = {
        "command": "python -m snippets run topology",
        "output": "ok",
        "result": main(),
        "provenance": _results.provenance("cpu", "none", 1),
    }
    _results.write(tmp_path, "topology", record)
    text = (tmp_path / "topology.diagram.md").read_text(encoding="utf-8")
    assert text.startswith("```mermaid\nflowchart LR") and "cp-provenance" in text
    assert (tmp_path / "topology.tp_groups.md").exists()
