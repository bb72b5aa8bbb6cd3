"""parse_topology against real published outputs and our own fixtures; bad input."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest

from snippets.hardware.topology_legend import link_kind
from snippets.hardware.topology_parser import TopologyError, parse_topology

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared" / "topo-samples"  # ../shared/topo-samples: public data
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "topology"


def expected(folder: Path) -> list[dict]:
    return json.loads((folder / "expected.json").read_text(encoding="utf-8"))


def check_against(case: dict, text: str) -> None:
    """The parse agrees with a list read off the matrix by hand."""
    topo = parse_topology(text)
    assert len(topo.gpus) == case["gpus"] and len(topo.nics) == case["nics"]
    for pair, code in case["pairs"].items():
        a, b = pair.split("-", 1)
        assert topo.link(a, b) == code and topo.link(b, a) == code, pair
    listed = {frozenset(p.split("-", 1)) for p in case["pairs"]}
    every = {
        frozenset(p) for p in itertools.combinations([d.name for d in topo.gpus], 2)
    }
    assert every <= listed, "expected.json must cover every GPU pair"
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
    expected(SHARED) if (SHARED / "expected.json").exists() else [],
    ids=lambda c: c["file"],
)
def test_real_samples(case: dict) -> None:
    check_against(case, (SHARED / case["file"]).read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", expected(FIXTURES), ids=lambda c: c["file"])
def test_fixtures(case: dict) -> None:
    text = (FIXTURES / case["file"]).read_text(encoding="utf-8")
    check_against(case, text)
    # the same matrix survives the ways copies mangle it
    check_against(case, text.replace("\t", "    "))
    check_against(case, text.replace("\n", "\r\n"))
    check_against(case, re.sub(r"\b(NV\d+|SYS|PIX)\b", "\x1b[1;32m\\1\x1b[0m", text))


def test_fixture_shapes_cover_the_issue() -> None:
    shapes = {
        c["file"]: parse_topology((FIXTURES / c["file"]).read_text(encoding="utf-8"))
        for c in expected(FIXTURES)
    }
    assert len(shapes) >= 8
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
    assert h100.gpus[0].extra == {"GPU NUMA ID": "N/A"}
    assert h100.index("mlx5_3") == h100.index("NIC3")
    h200 = shapes["h200_1gpu_1nic_ansi.txt"]  # one GPU: a 1×1 GPU matrix, and a NIC
    assert [d.name for d in h200.devices] == ["GPU0", "NIC0"]
    assert h200.matrix == [["X", "PHB"], ["PHB", "X"]]
    assert h200.gpus[0].extra == {"GPU NUMA ID": "N/A"}
    assert h200.nics[0].alias == "mlx5_0" and h200.nics[0].cpu_affinity is None


def test_extra_column_and_older_layout() -> None:
    text = (
        "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tFuture Column\n"
        "GPU0\t X \tNV4\t0-7\t0\tabc\nGPU1\tNV4\t X \t8-15\t1\tdef\n"
    )
    topo = parse_topology(text)
    assert topo.gpus[1].numa_affinity == "1"
    assert topo.gpus[1].extra == {"Future Column": "def"}
    squeezed = parse_topology(
        "     GPU0 GPU1 CPU Affinity NUMA Affinity\n"
        "GPU0 X NV4 0-7 0\nGPU1 NV4 X 8-15 1\nNIC Legend:\n"
    )
    assert squeezed.link("GPU0", "GPU1") == "NV4"
    assert squeezed.gpus[1].cpu_affinity == "8-15"
    assert squeezed.gpus[1].numa_affinity == "1"
    one = parse_topology("\tGPU0\tCPU Affinity\tNUMA Affinity\nGPU0\t X \t0-63\t0\n")
    assert len(one.gpus) == 1 and one.matrix == [["X"]]
    # a code the driver's own legend defines is accepted even if we have never seen it
    legend = parse_topology(
        "\tGPU0\tGPU1\nGPU0\t X \tC2C\nGPU1\tC2C\t X \n"
        "\nLegend:\n  C2C  = chip to chip\n"
    )
    assert legend.link("GPU0", "GPU1") == "C2C" and link_kind("C2C") == "other"
    with pytest.raises(KeyError, match="no device 'GPU9'; have GPU0, GPU1"):
        legend.index("GPU9")


GOOD = (
    "\tGPU0\tGPU1\tGPU2\tCPU Affinity\n"
    "GPU0\t X \tNV2\tPHB\t0-7\n"
    "GPU1\tNV2\t X \tPHB\t0-7\n"
    "GPU2\tPHB\tPHB\t X \t0-7\n"
)


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
            r"line 4: expected 3 link codes for GPU2, got 1",
        ),
        (
            GOOD + "GPU3\tPHB\tPHB\tPHB\t X\n",
            r"line 5: expected the matrix to end after GPU2",
        ),
    ],
)
def test_bad_input_names_the_line(text: str, message: str) -> None:
    parse_topology(GOOD)  # the unbroken matrix parses: each case breaks one thing
    with pytest.raises(TopologyError, match=message):
        parse_topology(text)
    assert issubclass(TopologyError, ValueError)


def test_text_only() -> None:
    with pytest.raises(TypeError, match=r"\(str\): bytes"):
        parse_topology(GOOD.encode())
