"""Two nodes on one machine: two ``torchrun`` launchers meet on loopback, as two real
nodes would, and the ranks check where they landed before they trust it.

A multi-node run starts with one launcher per node::

    torchrun --nnodes 2 --nproc-per-node 2 --node-rank 0|1 \\
        --rdzv-backend c10d --rdzv-endpoint 127.0.0.1:PORT -m snippets run two_nodes

Each launcher (torchrun's elastic agent) joins the rendezvous, is given a node's rank
(``GROUP_RANK``), and starts its local ranks with ``RANK``, ``LOCAL_RANK``,
``LOCAL_WORLD_SIZE``, ``GROUP_RANK`` and ``WORLD_SIZE`` set. Two facts the run checks:

* rank = group_rank · local_world_size + local_rank, so a node's ranks are consecutive
  and a ``Mesh(dp=nodes, tp=local_world_size)`` puts each ``tp_group`` inside one node
  and each ``dp_group`` across the nodes (one rank from each);
* under ``c10d`` the node's rank is not ``--node-rank`` (torchrun warns that it ignores
  it): the rendezvous sorts its participants by (host, launcher pid), so on one host
  the launcher with the lower pid (usually the one started first) is node 0.

On that mesh a hierarchical all-reduce (reduce-scatter inside the node, all-reduce of
each shard across nodes, all-gather inside the node, the shape of Horovod's
hierarchical all-reduce) must equal a flat ``dist.all_reduce``: bit for bit on
integer-valued fp64 data, whose sums are exact in any order; on random fp32 data within
the rounding bound of summing the world's values in some order.

Nothing is left behind: the launchers run in a folder of their own, each in a process
session of its own, with a deadline; if one fails or the deadline passes, every
launcher is stopped (SIGTERM, which torchrun passes on to its ranks, then SIGKILL), and
every process that carries this run's mark in its environment is found and killed by
its id (``snippets.core.sessions``, as for every torchrun the project starts). The
rendezvous port is a free one below the kernel's ephemeral range, and it is free again
when the run ends. Only Linux says what that range is; elsewhere (macOS) the port is
taken below every kernel's default range, and the run says it could not read the
kernel's own.

    python -m snippets run two_nodes                     # 2 nodes × 2 ranks, loopback
    python -m snippets run two_nodes --nodes 3 --nproc-per-node 1
    torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d \\
        --rdzv-endpoint HOST:29500 -m snippets run two_nodes      # on each real node
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import socket
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist

from snippets.core.claims import LawBroken, law
from snippets.core.cli import (
    main_entry,
    nonnegative_int,
    positive_float,
    positive_int,
)
from snippets.core.runtime import RankError, Spec, UsageError, print0
from snippets.core.sessions import Ended, run_sessions, torchrun_command
from snippets.parallel.mesh import Mesh

SPEC = Spec(
    summary="two torchrun nodes on loopback: rank mapping, hierarchical = flat "
    "all-reduce"
)
MAX_RANKS = 16  # processes one machine is asked to hold
NUMEL = 10_001  # odd, so the shards of the reduce-scatter need padding
# what torchrun sets in every rank's environment, all read as numbers
MAPPING = "RANK LOCAL_RANK GROUP_RANK LOCAL_WORLD_SIZE WORLD_SIZE GROUP_WORLD_SIZE"
# The kernel's ephemeral ports: Linux says which; where a kernel does not, from Linux's
# default start (32768) to the top, over the IANA range (49152–65535) of macOS and BSD.
PORT_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
ANY_EPHEMERAL = range(32768, 65536)


# --8<-- [start:mapping]
def where_am_i() -> dict:
    """What torchrun told this rank, and which launcher (host, pid) started it."""
    told = {name.lower(): int(os.environ[name]) for name in MAPPING.split()}
    return {**told, "host": socket.gethostname(), "launcher_pid": os.getppid()}


def mapping_problems(rows: list[dict]) -> list[str]:
    """What is wrong with every rank's ``where_am_i()``, one phrase each: ranks 0..W−1
    once, rank = group_rank · local_world_size + local_rank, and one group rank per
    launcher, local ranks 0..L−1 under each."""
    problems = []
    if sorted(r["rank"] for r in rows) != list(range(len(rows))):
        problems.append(f"ranks are {sorted(r['rank'] for r in rows)}")
    for r in rows:
        expected = r["group_rank"] * r["local_world_size"] + r["local_rank"]
        if r["rank"] != expected:
            problems.append(
                f"rank {r['rank']} ≠ group_rank·local_world_size + local_rank = "
                f"{r['group_rank']}·{r['local_world_size']} + {r['local_rank']}"
            )
    nodes: dict[tuple, list[dict]] = {}
    for r in rows:
        nodes.setdefault((r["host"], r["launcher_pid"]), []).append(r)
    if len({rs[0]["group_rank"] for rs in nodes.values()}) != len(nodes):
        problems.append("two launchers were given the same group rank")
    for (host, pid), rs in nodes.items():
        if len({r["group_rank"] for r in rs}) != 1:
            problems.append(f"launcher {host}:{pid} has several group ranks")
        if sorted(r["local_rank"] for r in rs) != list(range(len(rs))):
            problems.append(f"launcher {host}:{pid} has local ranks not 0..L−1")
    return problems


# --8<-- [end:mapping]


# --8<-- [start:hierarchical]
def hierarchical_allreduce(x: torch.Tensor, mesh: Mesh) -> None:
    """SUM over the world, in place, in three steps on a Mesh(dp=nodes, tp=L):
    inside the node a reduce-scatter (local rank i gets its node's sum of shard i),
    across nodes an all-reduce of shard i among the ranks of local rank i (the
    dp_group), inside the node an all-gather. A rank sends n/L elements across nodes,
    not n."""
    L, flat = mesh.tp, x.view(-1)  # (n,)
    s = math.ceil(flat.numel() / L)  # elements per shard; the last one padded
    padded = torch.cat([flat, flat.new_zeros(L * s - flat.numel())])  # (L·s,)
    shards = list(padded.view(L, s))  # L × (s,)
    mine = flat.new_empty(s)
    dist.reduce_scatter(mine, shards, group=mesh.tp_group)  # inside the node
    dist.all_reduce(mine, group=mesh.dp_group)  # across nodes, one rank per node
    dist.all_gather(shards, mine, group=mesh.tp_group)  # inside the node
    flat.copy_(torch.cat(shards)[: flat.numel()])


# --8<-- [end:hierarchical]


def rank_input(rank: int, dtype: torch.dtype, n: int = NUMEL) -> torch.Tensor:
    """Rank ``rank``'s data, the same on every call: integers in ±1000 for fp64 (any
    order sums them exactly), standard normals for fp32 (n,)."""
    g = torch.Generator().manual_seed(rank)
    if dtype == torch.float64:
        return torch.randint(-1000, 1001, (n,), generator=g).to(dtype)
    return torch.randn(n, generator=g, dtype=dtype)


def compare(mesh: Mesh, dtype: torch.dtype) -> dict:
    """The hierarchical all-reduce beside the flat one, and both against the sum of
    every rank's data worked out here in fp64: the oracle. A sum of W values in any
    order is within (W−1)·u·Σ|x| of it (u: the dtype's unit roundoff)."""
    world = mesh.world_size
    inputs = [rank_input(r, dtype) for r in range(world)]  # W × (n,)
    stacked = torch.stack(inputs).double()  # (W, n)
    truth = stacked.sum(0)  # exact for the integers, and for W normals in fp32
    bound = (world - 1) * torch.finfo(dtype).eps / 2 * stacked.abs().sum(0)
    flat, ours = inputs[mesh.rank].clone(), inputs[mesh.rank].clone()
    dist.all_reduce(flat)
    hierarchical_allreduce(ours, mesh)
    worst = max((t - truth).abs().sub(bound).max().item() for t in (flat, ours))
    return {
        "dtype": str(dtype).removeprefix("torch."),
        "elements": ours.numel(),
        "bits differ": int((ours.view(-1) != flat.view(-1)).sum()),
        "within the bound": worst <= 0,
    }


def worker(fail_rank: int | None = None) -> dict:
    """One rank under torchrun: report, check the mapping, build the mesh on it, and
    compare the two all-reduces. Every rank returns the same record."""
    rows: list = [None] * dist.get_world_size()
    dist.all_gather_object(rows, where_am_i())
    problems = mapping_problems(rows)
    if problems:
        raise LawBroken("rank mapping: " + "; ".join(problems))
    me = rows[dist.get_rank()]
    if me["rank"] == fail_rank:
        raise RuntimeError(f"rank {fail_rank} fails on purpose (--fail-rank)")
    mesh = Mesh(dp=me["group_world_size"], tp=me["local_world_size"])
    node = [
        r["rank"]
        for r in rows
        if r["launcher_pid"] == me["launcher_pid"] and r["host"] == me["host"]
    ]
    law(mesh.ranks["tp"] == sorted(node), (mesh.ranks["tp"], node))
    checks = [compare(mesh, dtype) for dtype in (torch.float64, torch.float32)]
    law(checks[0]["bits differ"] == 0, checks[0])
    law(all(c["within the bound"] for c in checks), checks)
    return {"ranks": rows, "checks": checks, "mesh": mesh.to_dict()}


def kernel_ephemeral_ports() -> range | None:
    """The ports the kernel hands out to sockets that do not choose one: every
    outgoing connection's own end, a gloo rank's included. None where the kernel
    does not say (no ``ip_local_port_range``: not Linux)."""
    try:
        lo, hi = map(int, PORT_RANGE.read_text().split())
    except (OSError, ValueError):
        return None
    return range(lo, hi + 1)


def ephemeral_ports() -> range:
    """The kernel's ephemeral ports, or where it does not say, every port a kernel's
    default range holds."""
    return kernel_ephemeral_ports() or ANY_EPHEMERAL


def free_port() -> int:
    """A port no one listens on now, below the kernel's ephemeral range: one the
    kernel gives out (a socket bound to port 0) can be given again, between this probe
    and the launcher's bind, to any process's outgoing connection."""
    ephemeral, pick = ephemeral_ports(), random.Random()
    for _ in range(100):
        port = pick.randrange(10_000, max(ephemeral.start, 10_001))
        if port not in ephemeral and port_is_free(port):
            return port
    with socket.socket() as s:  # a crowded machine: the kernel's choice after all
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_is_free(port: int) -> bool:
    """Nothing listens on ``port``: it can be bound and listened on here. A closed
    connection's TIME_WAIT does not count (SO_REUSEADDR, as servers set it)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            s.listen()
        except OSError:
            return False
    return True


# --8<-- [start:launch]
def launcher(
    nodes: int,
    nproc: int,
    node_rank: int,
    port: int,
    run_id: str,
    out: Path,
    timeout_s: float,
    fail_rank: int | None,
) -> list[str]:
    """One node's torchrun, meeting the others at 127.0.0.1:port: the command a
    reader types on each node, with this host's address in place of 127.0.0.1."""
    options = (
        f"--nnodes {nodes} --nproc-per-node {nproc} --node-rank {node_rank} "
        f"--rdzv-backend c10d --rdzv-endpoint 127.0.0.1:{port} --rdzv-id {run_id} "
        f"--rdzv-conf join_timeout={timeout_s + 30:g} --max-restarts 0"
    )  # the deadline here comes first; the launcher's own is for when this dies
    snippet = f"run two_nodes --backend gloo --timeout {timeout_s:g}"
    argv = torchrun_command(*options.split(), "-m", "snippets", *snippet.split())
    argv += ["--out", str(out)]
    return argv + ([] if fail_rank is None else ["--fail-rank", str(fail_rank)])


# --8<-- [end:launch]


@dataclass
class Launch(Ended):
    """What became of one run of several launchers: how each ended (by --node-rank,
    ``Ended``'s fields), and what the run made of it."""

    port: int
    start_order: list[int]  # the --node-rank of each launcher, in the order started
    outputs: dict[int, str]  # its stdout and stderr, its ranks' included
    result: dict | None  # rank 0's record, if the run got that far

    @property
    def ok(self) -> bool:
        codes = set(self.returncodes.values())
        return not self.stopped and codes == {0} and self.result is not None


# --8<-- [start:stop]
def launch_nodes(
    nodes: int = 2,
    nproc: int = 2,
    timeout_s: float = 60.0,
    fail_rank: int | None = None,
    start_order: list[int] | None = None,
) -> Launch:
    """Start one torchrun per node, in ``start_order`` (of --node-rank; by default
    the last first; one left out is a node that never comes), each in a session of
    its own; stop them all when one fails or ``timeout_s`` (the deadline of the whole
    run, its rendezvous and its process groups) passes; kill what they left."""
    run_id, port = uuid.uuid4().hex[:12], free_port()  # run_id: rendezvous and mark
    order = start_order or list(reversed(range(nodes)))
    with tempfile.TemporaryDirectory(prefix="commonplace-nodes-") as tmp:
        out = Path(tmp) / "rank0.json"
        argvs = {i: launcher(nodes, nproc, i, port, run_id, out, timeout_s, fail_rank)
                 for i in order}  # fmt: skip
        logs = {i: Path(tmp) / f"node{i}.log" for i in order}
        ended = run_sessions(argvs, logs, timeout_s, env={"OMP_NUM_THREADS": "1"},
                             mark=run_id)  # fmt: skip
        outputs = {i: log.read_text(errors="replace") for i, log in logs.items()}
        return Launch(**vars(ended), port=port, start_order=order, outputs=outputs,
                      result=read_result(out))  # fmt: skip


# --8<-- [end:stop]


def read_result(path: Path) -> dict | None:
    """Rank 0's record, which ``python -m snippets run --out`` wrote."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))["result"]
    except (OSError, ValueError, KeyError):
        return None


def group_rank_order(run: Launch) -> dict:
    """{node rank asked for: group rank given}, and the group ranks c10d's rule
    predicts on one host: launchers in the order of their pids."""
    given = {r["launcher_pid"]: r["group_rank"] for r in run.result["ranks"]}
    by_pid = sorted(run.pids.values())
    return {
        "given": {i: given[pid] for i, pid in run.pids.items()},
        "predicted": {i: by_pid.index(pid) for i, pid in run.pids.items()},
    }


def failure(run: Launch) -> Exception:
    """What stopped the run, as the command line reports a failed rank: the rank
    torchrun names as the root cause, and the last error line it printed."""
    if run.failed is None:
        return RuntimeError(
            f"the launchers ran past the deadline and were stopped (exit statuses "
            f"{list(run.returncodes.values())})"
        )
    log = run.outputs[run.failed]
    found = re.search(r"Root Cause.*?rank\s*:\s*(\d+)", log, re.S)
    if found is None:  # the launcher itself failed, before or after its ranks
        lines = [x for x in log.splitlines() if x.strip()] or ["(no output)"]
        return RuntimeError(f"launcher {run.failed} failed: {lines[-1].strip()}")
    rank = int(found[1])
    said = [
        x.split(": ", 1)[1] for x in log.splitlines() if x.startswith(f"[rank{rank}]: ")
    ]
    errors = [x for x in said if re.match(r"\w+(Error|Exception)\b", x)]
    cause = errors[-1] if errors else f"exit status {run.returncodes[run.failed]}"
    return RankError(rank, cause, "\n".join(said))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nodes", type=positive_int, default=2, help="launchers")
    parser.add_argument("--nproc-per-node", type=positive_int, default=2)
    parser.add_argument(
        "--deadline",
        type=positive_float,
        default=120.0,
        metavar="S",
        help="seconds for the whole run; then every launcher is stopped",
    )
    parser.add_argument(
        "--fail-rank",
        type=nonnegative_int,
        default=None,
        metavar="R",
        help="rank R raises after the mapping check: watch every process stop",
    )


def main(
    nodes: int = 2,
    nproc_per_node: int = 2,
    deadline: float = 120.0,
    fail_rank: int | None = None,
) -> dict:
    if dist.is_initialized():  # a rank, under the launchers (or a real cluster's)
        if "GROUP_RANK" not in os.environ:
            raise UsageError(
                "two_nodes starts its own launchers: run it without -n, or on each "
                "node under torchrun"
            )
        record = worker(fail_rank)
        print0(f"{len(record['ranks'])} ranks: mapping ✓, hierarchical = flat ✓")
        return record
    world = nodes * nproc_per_node
    if world > MAX_RANKS:
        raise UsageError(
            f"{nodes} nodes × {nproc_per_node} ranks = {world} processes on one "
            f"machine; choose at most {MAX_RANKS}"
        )
    if fail_rank is not None and fail_rank >= world:
        raise UsageError(
            f"--fail-rank {fail_rank} is not a rank: choose 0 to {world - 1}"
        )
    run = launch_nodes(nodes, nproc_per_node, deadline, fail_rank)
    if run.left_at_end:
        raise RuntimeError(f"processes left behind: {run.left_at_end}")
    if not run.ok:
        raise failure(run)
    order = group_rank_order(run)
    law(order["given"] == order["predicted"], order)
    return report(run, order)


def report(run: Launch, order: dict) -> dict:
    node_of = {pid: i for i, pid in run.pids.items()}
    ranks = [
        {
            "rank": r["rank"],
            "--node-rank": node_of[r["launcher_pid"]],
            "GROUP_RANK": r["group_rank"],
            "LOCAL_RANK": r["local_rank"],
            "LOCAL_WORLD_SIZE": r["local_world_size"],
        }
        for r in run.result["ranks"]
    ]
    nodes, nproc = len(run.pids), ranks[0]["LOCAL_WORLD_SIZE"]
    print(
        f"{nodes} torchrun launchers × {nproc} ranks, c10d rendezvous on "
        "127.0.0.1, gloo"
    )
    print("rank = group_rank · local_world_size + local_rank on every rank ✓")
    for i in run.start_order:
        nth = "first" if i == run.start_order[0] else "next"
        print(f"launcher --node-rank {i}, started {nth} (pid {run.pids[i]}): "
              f"GROUP_RANK {order['given'][i]}")  # fmt: skip
    print("GROUP_RANK follows the launchers' pids (c10d sorts them), not --node-rank ✓")
    checks = run.result["checks"]
    print(f"hierarchical vs flat all-reduce of {checks[0]['elements']:,} elements:")
    for c, data in zip(checks, ("integers", "normals")):
        print(f"  {c['dtype']} {data}: {c['bits differ']:,} differ in their bits; "
              "both within the rounding bound ✓")  # fmt: skip
    free = port_is_free(run.port)
    print(
        f"rendezvous port free again: {'yes' if free else 'no'}; processes left "
        f"behind: {len(run.left)}"
    )
    ephemeral = kernel_ephemeral_ports()
    unread = None if ephemeral else (
        f"This machine has no {PORT_RANGE}, so the kernel's own ephemeral range was "
        f"not read: the rendezvous port was taken below {ANY_EPHEMERAL.start}, under "
        "Linux's and the IANA default ranges."
    )  # fmt: skip
    if unread:
        print(unread)
    return {
        "tables": {"ranks": ranks, "allreduce": checks},
        "group_ranks": order,
        "port_free": free,
        "ephemeral_ports": [ephemeral.start, ephemeral.stop - 1] if ephemeral else None,
        "not_measured": unread,
        "left_behind": run.left,
        "provenance": {"backend": "gloo", "world_size": len(ranks)},
    }


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
