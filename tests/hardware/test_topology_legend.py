"""The legend against the legend the driver prints under its own matrix."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from snippets.hardware.topology_legend import (
    KIND,
    LEGEND,
    NEAREST_FIRST,
    closeness,
    link_kind,
)

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "topology"
SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "topo-samples"


def driver_legend() -> list[tuple[str, str]]:
    """(code, meaning) in the order nvidia-smi prints them: farthest first, X on top.
    From a real sample when ../shared is here, else our fixture of the same text."""
    path = SHARED / "dgx_a100_8gpu_mlx5x12.txt"
    if not path.exists():
        path = FIXTURES / "h100_nv18_4nic_ansi.txt"
    text = path.read_text(encoding="utf-8")
    return re.findall(r"^\s+(X|NV#|[A-Z]+)\s+= (.+)$", text, re.M)


def test_legend_is_the_drivers_nearest_first() -> None:
    codes = [code for code, _ in driver_legend()]
    assert codes[0] == "X"
    assert list(LEGEND) == codes[:0:-1]  # the driver lists the farthest first
    for code, meaning in driver_legend()[1:]:
        words = set(re.findall(r"[A-Za-z#/]+", LEGEND[code])) - {"and", "e", "g"}
        assert words <= set(re.findall(r"[A-Za-z#/]+", meaning)), code


def test_every_code_has_a_kind_and_nearer_is_lower() -> None:
    order = [link_kind(code) for code in ["NV12", *list(LEGEND)[1:]]]
    assert order == ["nvlink", "pcie-switch", "pcie-switch", "host-bridge"] + [
        "numa-node",
        "cross-socket",
    ]
    assert [closeness(c) for c in ["NV1", "PIX", "PXB", "PHB", "NODE", "SYS"]] == [
        0,
        1,
        1,
        2,
        3,
        4,
    ]
    assert link_kind("SOC") == link_kind("SYS") == KIND["SOC"]
    assert closeness("X") == len(NEAREST_FIRST) - 1 and link_kind("X") == "self"


@pytest.mark.parametrize("code", ["NV", "nv2", "C2C", "", "PIXX"])
def test_unknown_codes_are_other(code: str) -> None:
    assert link_kind(code) == "other"
    assert closeness(code) == NEAREST_FIRST.index("other")
