"""Reading ``nvidia-smi topo -m``: which GPUs talk fast, which ring to use, what to group.

The matrix has one row and one column per GPU and NIC; each cell says how the pair is
connected (legend below), and the last columns give each GPU's CPU and NUMA affinity.
:func:`parse_topology` reads it as printed, whatever the driver: tabs or spaces, ANSI
underline codes, an extra ``GPU NUMA ID`` column, ``SOC`` from old drivers.

    python -m snippets.hardware.topology               # this machine's matrix, or a sample if no nvidia-smi
    python -m snippets.hardware.topology --file topo.txt
"""

from __future__ import annotations

import argparse
import itertools
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from snippets.core.cli import main_entry
from snippets.core.runtime import Spec, UsageError, print0
from snippets.hardware.topology_model import (
    best_ring,
    brute_force_ring_key,
    link_bandwidth,
    predicted_busbw,
    ring_links,
    tp_groups,
)

SPEC = Spec(
    summary="parse nvidia-smi topo -m: links, affinity, best ring, TP groups, diagram"
)

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
    "SOC": "cross-socket",
}  # SOC: what older drivers printed for SYS
_CODE = re.compile(r"^(X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC)$")
_DEVICE = re.compile(
    r"GPU\d+|NIC\d+|[a-z][a-z0-9]*_[a-z0-9]+"
)  # GPU3, NIC10, mlx5_0, bnxt_re0
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def link_kind(code: str) -> str:
    """nvlink, pcie-switch, host-bridge, numa-node, cross-socket (or self, or other)."""
    if code == "X":
        return "self"
    return "nvlink" if re.fullmatch(r"NV\d+", code) else KIND.get(code, "other")


# --8<-- [end:legend]


class TopologyError(ValueError):
    """The text is not a ``nvidia-smi topo -m`` matrix; the message names the line."""


@dataclass(frozen=True)
class Device:
    name: str  # as printed: GPU0, NIC3, mlx5_0
    kind: str  # "gpu" or "nic"
    cpu_affinity: str | None = None
    numa_affinity: str | None = None
    alias: str | None = None  # from the NIC legend: NIC0 → mlx5_0
    extra: dict[str, str] = field(
        default_factory=dict
    )  # any other column, e.g. GPU NUMA ID


@dataclass(frozen=True)
class Topology:
    devices: list[Device]
    matrix: list[list[str]]  # matrix[i][j]: link code between devices i and j

    def index(self, name: str) -> int:
        for i, d in enumerate(self.devices):
            if name in (d.name, d.alias):
                return i
        raise KeyError(
            f"no device {name!r}; have {', '.join(d.name for d in self.devices)}"
        )

    def link(self, a: str, b: str) -> str:
        return self.matrix[self.index(a)][self.index(b)]

    @property
    def gpus(self) -> list[Device]:
        return [d for d in self.devices if d.kind == "gpu"]

    @property
    def nics(self) -> list[Device]:
        return [d for d in self.devices if d.kind == "nic"]

    def gpu_bandwidths(
        self, pcie_gen: int = 4, nvlink_gen: int = 3
    ) -> list[list[float]]:
        """GPU×GPU nominal GB/s per direction (0 on the diagonal), for the model."""
        g = [self.index(d.name) for d in self.gpus]
        return [
            [
                0.0
                if i == j
                else link_bandwidth(
                    self.matrix[i][j], pcie_gen=pcie_gen, nvlink_gen=nvlink_gen
                )
                for j in g
            ]
            for i in g
        ]


# --8<-- [start:parse]
def _header_columns(line: str) -> list[str]:
    """Columns are separated by tabs or runs of spaces; names like 'CPU Affinity' hold one."""
    cols = []
    for cell in re.split(r"\t| {2,}", line.strip()):
        words = cell.split()
        k = next(
            (i for i, w in enumerate(words) if not _DEVICE.fullmatch(w)), len(words)
        )
        cols += words[
            :k
        ]  # 'GPU0 GPU1' squeezed to single spaces by a copy-paste: still two columns
        rest = " ".join(words[k:])  # and 'CPU Affinity NUMA Affinity' still two names
        cols += [c for c in re.split(r"(?<=Affinity)\s+|(?<=NUMA ID)\s+", rest) if c]
    return cols


def parse_topology(text: str) -> Topology:
    """``nvidia-smi topo -m`` text → :class:`Topology`. Raises :class:`TopologyError`
    (a ValueError) naming the line and what was expected."""
    if not isinstance(text, str):
        raise TypeError(
            f"parse_topology takes the text nvidia-smi printed (str), got {type(text).__name__}"
        )
    lines = [_ANSI.sub("", line).rstrip() for line in text.splitlines()]

    def is_header(
        cols: list[str],
    ) -> bool:  # GPU0 first, then a name, not a link code (that is row GPU0)
        return cols[:1] == ["GPU0"] and (len(cols) == 1 or not _CODE.match(cols[1]))

    at = next(
        (i for i, line in enumerate(lines) if is_header(_header_columns(line))), None
    )
    if at is None:
        raise TopologyError(
            "no header line starting with GPU0: expected the matrix `nvidia-smi topo -m` prints"
        )
    columns = _header_columns(lines[at])
    rows: list[tuple[int, list[str]]] = []  # (line number, tokens) of each matrix row
    for i in range(at + 1, len(lines)):
        if not lines[i].strip() or "Legend" in lines[i]:
            break
        rows.append((i + 1, lines[i].split()))
    names = [tokens[0] for _, tokens in rows]
    n = next(
        (k for k, c in enumerate(columns) if not (_DEVICE.fullmatch(c) or c in names)),
        len(columns),
    )
    for k, (lineno, _) in enumerate(
        rows
    ):  # device columns come first, rows in the same order
        if k >= n:
            raise TopologyError(
                f"line {lineno}: expected the matrix to end after {columns[n - 1]} "
                f"(the header has {n} devices), got a row {names[k]!r}"
            )
        if names[k] != columns[k]:
            raise TopologyError(
                f"line {lineno}: expected the row for {columns[k]}, got {names[k]!r}"
            )
    if len(rows) < n:
        raise TopologyError(
            f"line {at + len(rows) + 2}: expected the row for {columns[len(rows)]}, got none"
        )
    attributes = columns[n:]  # CPU Affinity, NUMA Affinity, GPU NUMA ID, …
    legend = {
        m[1]
        for m in re.finditer(r"^\s*([A-Z][A-Z0-9#]*)\s+=", "\n".join(lines[at:]), re.M)
    }
    matrix, devices = [], []
    for (lineno, tokens), name in zip(rows, names):
        codes, values = tokens[1 : n + 1], tokens[n + 1 :]
        for col, code in zip(columns, codes):
            if not (_CODE.match(code) or code in legend):
                raise TopologyError(
                    f"line {lineno}: expected a link code (X, NV#, PIX, PXB, PHB, NODE, SYS) "
                    f"for {name}-{col}, got {code!r}"
                )
        if len(codes) < n:
            raise TopologyError(
                f"line {lineno}: expected {n} link codes for {name}, got {len(codes)}"
            )
        if len(values) > len(attributes):
            raise TopologyError(
                f"line {lineno}: expected at most {len(attributes)} values after the links "
                f"({', '.join(attributes) or 'none'}), got {values}"
            )
        attrs = dict(zip(attributes, values))  # a NIC row has none: its cells are empty
        matrix.append(codes)
        devices.append(
            Device(
                name,
                "gpu" if name.startswith("GPU") else "nic",
                attrs.pop("CPU Affinity", None),
                attrs.pop("NUMA Affinity", None),
                extra=attrs,
            )
        )
    for i, j in ((i, j) for i in range(n) for j in range(n)):
        if (matrix[i][j] == "X") != (i == j):
            raise TopologyError(
                f"line {rows[i][0]}: expected X exactly where {names[i]} meets itself, "
                f"got {matrix[i][j]!r} under {names[j]}"
            )
        if matrix[i][j] != matrix[j][i]:
            raise TopologyError(
                f"line {rows[i][0]}: {names[i]}-{names[j]} is {matrix[i][j]} but "
                f"{names[j]}-{names[i]} is {matrix[j][i]}; expected a symmetric matrix"
            )
    aliases = dict(
        re.findall(r"^\s*(NIC\d+):\s*(\S+)\s*$", "\n".join(lines[at:]), re.M)
    )  # the NIC Legend
    devices = [
        Device(
            d.name,
            d.kind,
            d.cpu_affinity,
            d.numa_affinity,
            aliases.get(d.name),
            d.extra,
        )
        for d in devices
    ]
    return Topology(devices, matrix)


# --8<-- [end:parse]


# --8<-- [start:diagram]
STYLE = {
    "nvlink": "stroke:#2ca02c",
    "pcie-switch": "stroke:#1f77b4,stroke-width:2px",
    "host-bridge": "stroke:#9467bd,stroke-width:2px",
    "numa-node": "stroke:#ff7f0e,stroke-width:2px",
    "cross-socket": "stroke:#d62728,stroke-width:1px,stroke-dasharray:4 3",
    "other": "stroke:#7f7f7f",
}


def mermaid(topo: Topology) -> str:
    """A mermaid flowchart: GPUs boxed by NUMA node, links coloured by kind (green NVLink,
    blue PCIe switch, purple host bridge, orange within a NUMA node, dashed red across
    sockets). GPU pairs across NUMA boxes are left out (the boxes say it), and each NIC is
    drawn to its nearest GPUs only, or the picture is a hairball."""
    out = ["```mermaid", "flowchart LR"]
    for numa in dict.fromkeys(d.numa_affinity for d in topo.gpus):
        members = [d.name for d in topo.gpus if d.numa_affinity == numa]
        boxed = numa not in (None, "N/A")
        out += (
            [f'  subgraph numa_{re.sub(r"[^0-9A-Za-z]", "_", numa)}["NUMA {numa}"]']
            if boxed
            else []
        )
        out += [f"  {name}" for name in members] + (["  end"] if boxed else [])
    g = [topo.index(d.name) for d in topo.gpus]
    boxes = [
        topo.devices[a].numa_affinity
        if topo.devices[a].numa_affinity not in (None, "N/A")
        else a
        for a in g
    ]
    edges = [
        (a, b)
        for i, a in enumerate(g)
        for j, b in enumerate(g)
        if i < j
        and not (  # boxes say "across sockets"
            link_kind(topo.matrix[a][b]) == "cross-socket"
            and isinstance(boxes[i], str)
            and boxes[i] != boxes[j]
        )
    ]
    for x in (topo.index(d.name) for d in topo.nics):
        near = min(_closeness(topo.matrix[x][a]) for a in g)
        edges += [(a, x) for a in g if _closeness(topo.matrix[x][a]) == near]
        out.append(
            f'  {topo.devices[x].name}(["{topo.devices[x].alias or topo.devices[x].name}"])'
        )
    names = [d.name for d in topo.devices]
    out += [f"  {names[a]} ---|{topo.matrix[a][b]}| {names[b]}" for a, b in edges]
    for i, code in enumerate(topo.matrix[a][b] for a, b in edges):
        width = (
            f",stroke-width:{min(2 + int(code[2:]), 8)}px"
            if link_kind(code) == "nvlink"
            else ""
        )  # thicker: more links
        out.append(f"  linkStyle {i} {STYLE[link_kind(code)]}{width}")
    return "\n".join(out + ["```"])


def _closeness(code: str) -> int:
    order = [
        "nvlink",
        "pcie-switch",
        "host-bridge",
        "numa-node",
        "cross-socket",
        "other",
        "self",
    ]
    return order.index(link_kind(code))


# --8<-- [end:diagram]


# A shape worth explaining: 8×V100 in a hybrid cube-mesh like a DGX-1 (written for this
# note in the documented format, not captured from a machine). Each GPU has 6 NVLinks
# split NV1/NV2 over four peers; the other three pairs cross the sockets.
SAMPLE = """\
        GPU0    GPU1    GPU2    GPU3    GPU4    GPU5    GPU6    GPU7    CPU Affinity    NUMA Affinity
GPU0     X      NV1     NV1     NV2     NV2     SYS     SYS     SYS     0-19,40-59      0
GPU1    NV1      X      NV2     NV1     SYS     NV2     SYS     SYS     0-19,40-59      0
GPU2    NV1     NV2      X      NV2     SYS     SYS     NV1     SYS     0-19,40-59      0
GPU3    NV2     NV1     NV2      X      SYS     SYS     SYS     NV1     0-19,40-59      0
GPU4    NV2     SYS     SYS     SYS      X      NV1     NV1     NV2     20-39,60-79     1
GPU5    SYS     NV2     SYS     SYS     NV1      X      NV2     NV1     20-39,60-79     1
GPU6    SYS     SYS     NV1     SYS     NV1     NV2      X      NV2     20-39,60-79     1
GPU7    SYS     SYS     SYS     NV1     NV2     NV1     NV2      X      20-39,60-79     1
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--file",
        default=None,
        help="read this saved `nvidia-smi topo -m` output instead",
    )
    parser.add_argument(
        "--pcie-gen",
        type=int,
        default=None,
        choices=(3, 4, 5),
        help="PCIe generation (default: a guess)",
    )
    parser.add_argument(
        "--nvlink-gen",
        type=int,
        default=None,
        choices=(1, 2, 3, 4, 5),
        help="NVLink generation (default: a guess)",
    )


def guess_generations(topo: Topology) -> tuple[int, int]:
    """(PCIe, NVLink) generation, guessed from the most NVLinks any pair has: only Hopper
    has more than 12 per GPU (NVLink 4 with PCIe 5), only Ampere more than 6 (NVLink 3,
    PCIe 4); fewer, and it is a V100-era box (NVLink 2, PCIe 3). No NVLink: PCIe 4."""
    most = max(
        (int(c[2:]) for row in topo.matrix for c in row if link_kind(c) == "nvlink"),
        default=0,
    )
    return (5, 4) if most > 12 else (4, 3) if most > 6 or most == 0 else (3, 2)


def read_matrix(file: str | None) -> tuple[str, str]:
    """(text, where it came from): --file, else this machine's nvidia-smi, else SAMPLE."""
    if file is not None:
        try:
            return Path(file).read_text(encoding="utf-8", errors="replace"), file
        except OSError as exc:
            raise UsageError(
                f"cannot read --file {file}: {exc.strerror or exc}"
            ) from None
    if shutil.which("nvidia-smi"):
        try:
            run = subprocess.run(
                ["nvidia-smi", "topo", "-m"], capture_output=True, text=True, timeout=30
            )
            if run.returncode == 0 and "GPU0" in run.stdout:
                return run.stdout, "this machine's `nvidia-smi topo -m`"
        except (OSError, subprocess.SubprocessError):
            pass
        print0(
            "nvidia-smi is here but `nvidia-smi topo -m` gave no matrix; explaining a sample instead"
        )
    else:
        print0(
            "no nvidia-smi on this machine; explaining a sample instead (--file PATH reads a saved one)"
        )
    return SAMPLE, "sample: 8×V100 hybrid cube-mesh (DGX-1 shape)"


def main(
    file: str | None = None, pcie_gen: int | None = None, nvlink_gen: int | None = None
) -> dict:
    text, source = read_matrix(file)
    try:
        topo = parse_topology(text)
    except TopologyError as exc:
        if file is None:
            raise
        raise UsageError(f"{file}: {exc}") from None
    gpus, n = topo.gpus, len(topo.gpus)
    guessed = guess_generations(topo)
    pcie_gen, nvlink_gen = pcie_gen or guessed[0], nvlink_gen or guessed[1]
    print0(
        f"{source}: {n} GPU(s), {len(topo.nics)} NIC(s); PCIe {pcie_gen}.0 and NVLink {nvlink_gen} "
        f"assumed (--pcie-gen/--nvlink-gen to change)"
    )
    pairs = [
        {
            "pair": f"{a.name}-{b.name}",
            "link": topo.link(a.name, b.name),
            "kind": link_kind(topo.link(a.name, b.name)),
        }
        for i, a in enumerate(gpus)
        for b in gpus[i + 1 :]
    ]

    def nearest_nics(
        gpu: str,
    ) -> str:  # the NICs fewest bridges away, unless that means crossing sockets
        near = min(
            (_closeness(topo.link(gpu, x.name)) for x in topo.nics), default=None
        )
        return (
            ", ".join(
                x.alias or x.name
                for x in topo.nics
                if _closeness(topo.link(gpu, x.name)) == near
                and link_kind(topo.link(gpu, x.name)) != "cross-socket"
            )
            or "-"
        )

    affinity = [
        {
            "gpu": d.name,
            "CPU affinity": d.cpu_affinity or "-",
            "NUMA": d.numa_affinity or "-",
            "nearest NIC": nearest_nics(d.name),
        }
        for d in gpus
    ]
    for row in affinity:
        print0(
            f"  {row['gpu']}: CPUs {row['CPU affinity']}, NUMA {row['NUMA']}, nearest NIC {row['nearest NIC']}"
        )
    result: dict = {
        "source": source,
        "gpus": n,
        "nics": len(topo.nics),
        "tables": {"pairs": pairs, "affinity": affinity},
        "markdown": {"diagram": mermaid(topo)},
    }
    if not 2 <= n <= 10:
        print0(
            f"{n} GPU(s): "
            + (
                "no peers, so no ring and no groups to choose"
                if n < 2
                else "too many for the brute-force ring search (at most 10)"
            )
        )
        return result
    try:
        w = topo.gpu_bandwidths(pcie_gen, nvlink_gen)  # [n, n] GB/s per direction
    except ValueError as exc:  # a link code newer than this model (the parser accepted it from the legend)
        print0(f"no ring: {exc}")
        return result
    for row, (i, j) in zip(
        pairs, itertools.combinations(range(n), 2)
    ):  # the same order as pairs
        row["GB/s"] = w[i][j]
    ring = best_ring(w)
    naive = list(range(n))
    for name, order in (("naive ring", naive), ("best ring", ring)):
        hops = ring_links(order, w)
        print0(
            f"{name:>10}: {' → '.join(gpus[g].name for g in order)} → {gpus[order[0]].name}; slowest hop "
            f"{min(hops):g} GB/s → predicted all-reduce busbw {predicted_busbw(w, order):g} GB/s"
        )
    hops = ring_links(ring, w)
    if n <= 8:  # the oracle: every one of the n! orders, no shortcuts
        assert (min(hops), sum(hops)) == brute_force_ring_key(w), (
            "best_ring missed a better ring"
        )
    assert (
        abs(predicted_busbw(w, ring) - min(ring_links(ring, w))) < 1e-9
    )  # busbw of a ring = its slowest hop
    groups = []
    for size in (k for k in range(2, n) if n % k == 0):
        split = tp_groups(w, size)
        slowest = min(w[a][b] for g in split for a in g for b in g if a != b)
        groups.append(
            {
                "TP size": size,
                "groups": " | ".join(
                    ",".join(gpus[g].name[3:] for g in grp) for grp in split
                ),
                "slowest link inside (GB/s)": slowest,
            }
        )
        print0(
            f"  TP={size}: {groups[-1]['groups']} (slowest link inside a group {slowest:g} GB/s)"
        )
    result.update(
        ring=[gpus[g].name for g in ring], busbw_gbps=predicted_busbw(w, ring)
    )
    result["tables"]["tp_groups"] = groups
    return result


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
