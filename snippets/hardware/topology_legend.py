"""What the cells of ``nvidia-smi topo -m`` mean: the driver's legend, each code's link
kind, and how near one kind is compared with another.

The parser (``topology_parser``), the diagram (``topology_diagram``) and the snippet
(``topology``) all read link codes through :func:`link_kind`, so a new code is taught
here once.
"""

from __future__ import annotations

import re

# --8<-- [start:legend]
LEGEND = {  # nvidia-smi's own legend, nearest first
    "NV#": "a bonded set of # NVLinks",
    "PIX": "at most a single PCIe bridge",
    "PXB": "multiple PCIe bridges (without the PCIe Host Bridge)",
    "PHB": "PCIe and a PCIe Host Bridge (typically the CPU)",
    "NODE": "PCIe and the interconnect between PCIe Host Bridges within a NUMA node",
    "SYS": "PCIe and the SMP interconnect between NUMA nodes (e.g. QPI/UPI)",
}
KIND = {
    "PIX": "pcie-switch",
    "PXB": "pcie-switch",
    "PHB": "host-bridge",
    "NODE": "numa-node",
    "SYS": "cross-socket",
    "SOC": "cross-socket",  # what older drivers printed for SYS
}
NEAREST_FIRST = (
    "nvlink",
    "pcie-switch",
    "host-bridge",
    "numa-node",
    "cross-socket",
    "other",  # a code the driver's legend defines but this table does not (C2C, …)
    "self",
)


def link_kind(code: str) -> str:
    """nvlink, pcie-switch, host-bridge, numa-node, cross-socket (or self, or other)."""
    if code == "X":
        return "self"
    return "nvlink" if re.fullmatch(r"NV\d+", code) else KIND.get(code, "other")


# --8<-- [end:legend]


def closeness(code: str) -> int:
    """0 for NVLink up to 5 for an unknown code (6: a device and itself); lower is
    nearer, so ``min`` over a row finds a device's nearest peers."""
    return NEAREST_FIRST.index(link_kind(code))
