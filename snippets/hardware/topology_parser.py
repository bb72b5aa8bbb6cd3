"""``nvidia-smi topo -m`` text → a :class:`Topology`: devices, link codes, affinity.

The matrix has one row and one column per GPU and NIC; each cell says how the pair is
connected (``topology_legend``), and the last columns give each GPU's CPU and NUMA
affinity. :func:`parse_topology` reads it as printed, whatever the driver: tabs or
spaces, ANSI underline codes, an extra ``GPU NUMA ID`` column, ``SOC`` from old drivers,
a code that only the driver's own legend defines. Anything else is a
:class:`TopologyError` that names the line and what was expected.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_CODE = re.compile(r"^(X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC)$")
_DEVICE = re.compile(
    r"GPU\d+|NIC\d+|[a-z][a-z0-9]*_[a-z0-9]+"
)  # GPU3, mlx5_0, bnxt_re0
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


class TopologyError(ValueError):
    """The text is not a ``nvidia-smi topo -m`` matrix; the message names the line."""


@dataclass(frozen=True)
class Device:
    name: str  # as printed: GPU0, NIC3, mlx5_0
    kind: str  # "gpu" or "nic"
    cpu_affinity: str | None = None
    numa_affinity: str | None = None
    alias: str | None = None  # from the NIC legend: NIC0 → mlx5_0
    extra: dict[str, str] = field(default_factory=dict)  # other columns: GPU NUMA ID


@dataclass(frozen=True)
class Topology:
    devices: list[Device]
    matrix: list[list[str]]  # matrix[i][j]: link code between devices i and j

    def index(self, name: str) -> int:
        for i, d in enumerate(self.devices):
            if name in (d.name, d.alias):
                return i
        have = ", ".join(d.name for d in self.devices)
        raise KeyError(f"no device {name!r}; have {have}")

    def link(self, a: str, b: str) -> str:
        return self.matrix[self.index(a)][self.index(b)]

    @property
    def gpus(self) -> list[Device]:
        return [d for d in self.devices if d.kind == "gpu"]

    @property
    def nics(self) -> list[Device]:
        return [d for d in self.devices if d.kind == "nic"]


# --8<-- [start:parse]
def _header_columns(line: str) -> list[str]:
    """Columns are split by tabs or runs of spaces; 'CPU Affinity' is one column."""
    cols = []
    for cell in re.split(r"\t| {2,}", line.strip()):
        words = cell.split()
        k = next((i for i, w in enumerate(words) if not _DEVICE.fullmatch(w)), None)
        k = len(words) if k is None else k
        cols += words[:k]  # 'GPU0 GPU1' squeezed to one space: still two columns
        rest = " ".join(words[k:])  # 'CPU Affinity NUMA Affinity': still two names
        cols += [c for c in re.split(r"(?<=Affinity)\s+|(?<=NUMA ID)\s+", rest) if c]
    return cols


def _is_header(cols: list[str]) -> bool:
    # GPU0 first, then a device or a column name; a link code there is row GPU0
    return cols[:1] == ["GPU0"] and (len(cols) == 1 or not _CODE.match(cols[1]))


def parse_topology(text: str) -> Topology:
    """``nvidia-smi topo -m`` text → :class:`Topology`. Raises :class:`TopologyError`
    (a ValueError) naming the line and what was expected."""
    if not isinstance(text, str):
        got = type(text).__name__
        raise TypeError(
            f"parse_topology takes the text nvidia-smi printed (str): {got}"
        )
    lines = [_ANSI.sub("", line).rstrip() for line in text.splitlines()]
    at = next((i for i, s in enumerate(lines) if _is_header(_header_columns(s))), None)
    if at is None:
        raise TopologyError(
            "no header line starting with GPU0: "
            "expected the matrix `nvidia-smi topo -m` prints"
        )
    columns = _header_columns(lines[at])
    rows: list[tuple[int, list[str]]] = []  # (line number, tokens) of each matrix row
    for i in range(at + 1, len(lines)):
        if not lines[i].strip() or "Legend" in lines[i]:
            break
        rows.append((i + 1, lines[i].split()))
    names = [tokens[0] for _, tokens in rows]
    # device columns come first, and the rows are in the same order
    n = next(
        (k for k, c in enumerate(columns) if not (_DEVICE.fullmatch(c) or c in names)),
        len(columns),
    )
    for k, (lineno, _) in enumerate(rows):
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
            f"line {at + len(rows) + 2}: "
            f"expected the row for {columns[len(rows)]}, got none"
        )
    attributes = columns[n:]  # CPU Affinity, NUMA Affinity, GPU NUMA ID, …
    after = "\n".join(lines[at:])
    legend = {m[1] for m in re.finditer(r"^\s*([A-Z][A-Z0-9#]*)\s+=", after, re.M)}
    aliases = dict(re.findall(r"^\s*(NIC\d+):\s*(\S+)\s*$", after, re.M))  # NIC Legend
    matrix, devices = [], []
    for (lineno, tokens), name in zip(rows, names):
        codes, values = tokens[1 : n + 1], tokens[n + 1 :]
        for col, code in zip(columns, codes):
            if not (_CODE.match(code) or code in legend):
                raise TopologyError(
                    f"line {lineno}: expected a link code (X, NV#, PIX, PXB, PHB, "
                    f"NODE, SYS) for {name}-{col}, got {code!r}"
                )
        if len(codes) < n:
            raise TopologyError(
                f"line {lineno}: expected {n} link codes for {name}, got {len(codes)}"
            )
        if len(values) > len(attributes):
            raise TopologyError(
                f"line {lineno}: expected at most {len(attributes)} values after the "
                f"links ({', '.join(attributes) or 'none'}), got {values}"
            )
        attrs = dict(zip(attributes, values))  # a NIC row has none: its cells are empty
        matrix.append(codes)
        devices.append(
            Device(
                name,
                "gpu" if name.startswith("GPU") else "nic",
                attrs.pop("CPU Affinity", None),
                attrs.pop("NUMA Affinity", None),
                aliases.get(name),
                extra=attrs,
            )
        )
    _check_square(matrix, names, [lineno for lineno, _ in rows])
    return Topology(devices, matrix)


def _check_square(matrix: list[list[str]], names: list[str], at: list[int]) -> None:
    """X exactly on the diagonal, and the same code both ways."""
    for i, j in ((i, j) for i in range(len(names)) for j in range(len(names))):
        if (matrix[i][j] == "X") != (i == j):
            raise TopologyError(
                f"line {at[i]}: expected X exactly where {names[i]} meets itself, "
                f"got {matrix[i][j]!r} under {names[j]}"
            )
        if matrix[i][j] != matrix[j][i]:
            raise TopologyError(
                f"line {at[i]}: {names[i]}-{names[j]} is {matrix[i][j]} but "
                f"{names[j]}-{names[i]} is {matrix[j][i]}; expected a symmetric matrix"
            )


# --8<-- [end:parse]
