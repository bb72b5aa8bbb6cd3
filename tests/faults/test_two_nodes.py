"""Two nodes on loopback: two real torchrun launchers, the rank mapping checked against
the formula and c10d's ordering rule, the hierarchical all-reduce against sums worked
out here, a failing rank and a node that never comes each stopping everything, and
neither a process nor the port left behind."""

from __future__ import annotations

import os
import socket

import pytest
import torch
import torch.distributed as dist
from conftest import process_children, refused

from snippets.core.errors import RankError, UsageError
from snippets.core.runtime import launch
from snippets.faults import two_nodes
from snippets.parallel.mesh import Mesh


def gone(pid: int) -> bool:
    try:
        state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"


@pytest.fixture(scope="module")
def run() -> two_nodes.Launch:
    return two_nodes.launch_nodes(nodes=2, nproc=2, timeout_s=120)


def test_the_two_launchers_finish_and_leave_nothing(run: two_nodes.Launch) -> None:
    assert run.ok, {i: out[-2000:] for i, out in run.outputs.items()}
    assert run.stopped == [] and run.left == [] and run.left_at_end == []
    assert all(gone(pid) for pid in run.pids.values())
    assert process_children(os.getpid()) == []
    assert two_nodes.port_is_free(run.port)


def test_every_rank_is_group_rank_times_local_world_size_plus_local_rank(
    run: two_nodes.Launch,
) -> None:
    rows = run.result["ranks"]
    assert [r["rank"] for r in rows] == [0, 1, 2, 3]
    assert {r["world_size"] for r in rows} == {4}
    assert {r["group_world_size"] for r in rows} == {2}
    for node_rank, pid in run.pids.items():
        mine = [r for r in rows if r["launcher_pid"] == pid]
        assert sorted(r["local_rank"] for r in mine) == [0, 1]
        (group,) = {r["group_rank"] for r in mine}
        # a node's ranks are consecutive: 2·group_rank and 2·group_rank + 1
        assert sorted(r["rank"] for r in mine) == [2 * group, 2 * group + 1]


def test_group_rank_follows_the_launcher_pids_not_node_rank(
    run: two_nodes.Launch,
) -> None:
    assert run.start_order == [1, 0]  # --node-rank 1 is started first
    first, second = (run.pids[i] for i in run.start_order)
    by_pid = {r["launcher_pid"]: r["group_rank"] for r in run.result["ranks"]}
    # c10d sorts its participants by (host, pid); both are on this host
    assert by_pid[min(first, second)] == 0 and by_pid[max(first, second)] == 1
    order = two_nodes.group_rank_order(run)
    assert order["given"] == order["predicted"]


def test_exact_data_gives_the_same_bits_both_ways(run: two_nodes.Launch) -> None:
    by_dtype = {c["dtype"]: c for c in run.result["checks"]}
    assert by_dtype["float64"]["bits differ"] == 0
    assert all(c["within the bound"] for c in by_dtype.values())


def hierarchical_on(dp: int, tp: int, n: int) -> torch.Tensor:
    mesh = Mesh(dp=dp, tp=tp)
    x = two_nodes.rank_input(dist.get_rank(), torch.float64, n)
    two_nodes.hierarchical_allreduce(x, mesh)
    return x


@pytest.mark.parametrize("dp, tp, n", [(2, 2, 7), (3, 2, 1), (2, 3, 10)])
def test_hierarchical_allreduce_is_the_exact_sum(dp: int, tp: int, n: int) -> None:
    # integer-valued fp64: the sum is exact whatever the order, so bits must match
    world = dp * tp
    got = launch(hierarchical_on, world, "gloo", timeout_s=60, args=(dp, tp, n))
    want = sum(two_nodes.rank_input(r, torch.float64, n) for r in range(world))
    for x in got:
        assert torch.equal(x, want)


def test_mapping_problems_finds_ranks_dealt_round_robin() -> None:
    # rank = local_rank · nodes + group_rank: each node gets every other rank
    rows = [
        {"rank": lr * 2 + g, "local_rank": lr, "group_rank": g,
         "local_world_size": 2, "host": "h", "launcher_pid": 100 + g}
        for g in (0, 1) for lr in (0, 1)
    ]  # fmt: skip
    problems = two_nodes.mapping_problems(rows)
    assert any("rank 1 ≠" in p for p in problems), problems
    good = [{**r, "rank": r["group_rank"] * 2 + r["local_rank"]} for r in rows]
    assert two_nodes.mapping_problems(good) == []


def test_a_failing_rank_stops_both_launchers_and_is_named() -> None:
    run = two_nodes.launch_nodes(nodes=2, nproc=2, timeout_s=120, fail_rank=3)
    assert not run.ok
    err = two_nodes.failure(run)
    assert isinstance(err, RankError) and err.rank == 3, err
    assert "fails on purpose" in err.cause
    assert all(code != 0 for code in run.returncodes.values())
    assert run.left == [] and run.left_at_end == []
    assert all(gone(pid) for pid in run.pids.values())
    assert two_nodes.port_is_free(run.port)


def test_a_node_that_never_comes_is_stopped_at_the_deadline() -> None:
    run = two_nodes.launch_nodes(nodes=2, nproc=1, timeout_s=5, start_order=[0])
    assert run.stopped == [0] and run.failed is None
    assert "deadline" in str(two_nodes.failure(run))
    assert run.left == [] and run.left_at_end == []
    assert two_nodes.port_is_free(run.port)


def test_the_port_is_free_and_one_no_connection_is_given() -> None:
    ephemeral = two_nodes.ephemeral_ports()
    ports = [two_nodes.free_port() for _ in range(20)]
    assert all(p not in ephemeral and 10_000 <= p < 65536 for p in ports), ports
    assert all(two_nodes.port_is_free(p) for p in ports)
    with socket.create_server(("127.0.0.1", 0)) as server:  # an outgoing end's port
        with socket.create_connection(server.getsockname()) as client:
            assert client.getsockname()[1] in ephemeral


def test_the_report_gives_the_kernels_ephemeral_range(run, capsys) -> None:
    record = two_nodes.report(run, two_nodes.group_rank_order(run))
    if not os.path.exists("/proc/sys/net/ipv4/ip_local_port_range"):
        pytest.skip("not Linux: the next test is this machine's")
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        assert record["ephemeral_ports"] == [int(x) for x in f.read().split()]
    assert record["not_measured"] is None
    assert "ip_local_port_range" not in capsys.readouterr().out


def test_without_the_port_range_the_port_is_below_every_default_and_said(
    run, tmp_path, monkeypatch, capsys
) -> None:
    """The reader taken away, as on macOS: ip_local_port_range is not there."""
    monkeypatch.setattr(two_nodes, "PORT_RANGE", tmp_path / "ip_local_port_range")
    ports = [two_nodes.free_port() for _ in range(20)]
    assert all(10_000 <= p < 32768 for p in ports), ports  # below Linux's and IANA's
    record = two_nodes.report(run, two_nodes.group_rank_order(run))
    said = record["not_measured"]
    assert record["ephemeral_ports"] is None and "ip_local_port_range" in said
    assert said in capsys.readouterr().out.splitlines()  # in the note's printout


def test_port_is_free_sees_a_listener() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        assert not two_nodes.port_is_free(s.getsockname()[1])


@pytest.mark.parametrize(
    "options, says",
    [
        ({"fail_rank": 4}, "--fail-rank 4 is not a rank"),
        ({"nodes": 9, "nproc_per_node": 2}, "choose at most 16"),
    ],
)
def test_bad_input_is_refused_before_any_launcher_starts(
    options: dict, says: str
) -> None:
    with pytest.raises(UsageError, match=says):
        two_nodes.main(**options)
    assert process_children(os.getpid()) == []


@pytest.mark.parametrize(
    "args, says",
    [
        (["--fail-rank", "4"], "error: --fail-rank 4 is not a rank: choose 0 to 3"),
        (["-n", "2"], "error: two_nodes starts its own launchers"),
    ],
)
def test_bad_input_on_the_command_line_is_one_line_and_exit_2(
    args: list[str], says: str, capfd
) -> None:
    assert refused(["run", "two_nodes", *args], capfd).startswith(says)
    assert process_children(os.getpid()) == []  # no launcher started, none left
