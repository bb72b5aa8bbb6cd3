"""The (dp, pp, cp, tp) rank grid. As arithmetic, for every shape of up to 24 ranks:
each axis's groups, against a brute force over the grid's coordinates. Built on 4
gloo ranks (2x1x1x2 and 1x2x1x2, one launch): every group's all-reduce of the rank
ids and its all-gather agree with the arithmetic and with torch's DeviceMesh; the
pipeline neighbours, first and last stage; a product that is not the world size is
one UsageError line through main(). Expert parallel folded over dp: its groups for
every ep that divides dp, against a brute force, and built on 4 ranks against
torch's DeviceMesh with dp split into (dp/ep, ep); an ep that does not divide dp is
one line."""

from __future__ import annotations

import itertools
import math

import pytest
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh

from snippets.core.runtime import UsageError, launch
from snippets.parallel import mesh as mesh_module
from snippets.parallel.mesh import AXES, Mesh, coordinates, describe, group_ranks


def shapes(largest: int):
    for world in range(1, largest + 1):
        for dp, pp, cp in itertools.product(range(1, world + 1), repeat=3):
            if world % (dp * pp * cp) == 0:
                yield dp, pp, cp, world // (dp * pp * cp)


def brute_force(axis: str, shape: tuple) -> list[list[int]]:
    """Walk the grid in row-major order; a group is the ranks sharing every
    coordinate not on the axis, listed in the order the walk meets them."""
    moving = set(axis.split("_"))
    groups: dict[tuple, list[int]] = {}
    for rank, where in enumerate(itertools.product(*(range(n) for n in shape))):
        key = tuple(c for a, c in zip(AXES, where) if a not in moving)
        groups.setdefault(key, []).append(rank)
    return [groups[k] for k in sorted(groups)]


def brute_force_experts(axis: str, shape: tuple, ep: int) -> list[list[int]]:
    """An ep group: the ranks sharing dp // ep, pp, cp and tp; an expert_dp group:
    sharing dp mod ep (the experts held), pp and tp. In walk order."""
    groups: dict[tuple, list[int]] = {}
    for rank, (d, p, c, t) in enumerate(itertools.product(*(range(n) for n in shape))):
        key = (d // ep, p, c, t) if axis == "ep" else (d % ep, p, t)
        groups.setdefault(key, []).append(rank)
    return [groups[k] for k in sorted(groups)]


def test_expert_groups_for_every_shape_and_ep_up_to_24_ranks() -> None:
    count = 0
    for shape in shapes(24):
        for ep in (e for e in range(1, shape[0] + 1) if shape[0] % e == 0):
            count += 1
            for axis in ("ep", "expert_dp"):
                found = group_ranks(axis, shape, ep)
                assert found == brute_force_experts(axis, shape, ep), (axis, shape)
            mesh_module.check_expert_arithmetic(shape, ep)
            if ep == 1:  # no expert parallel: the experts are replicated over dp·cp
                assert group_ranks("expert_dp", shape) == group_ranks("dp_cp", shape)
            lines = describe(shape, ep=ep).splitlines()
            assert all(len(line) <= 88 for line in lines)
    assert count > 600
    lines = describe((4, 1, 2, 1), ep=2).splitlines()
    assert "ep groups         {0,2} {1,3} {4,6} {5,7}" in lines
    assert "expert_dp groups  {0,1,4,5} {2,3,6,7}" in lines


def test_ep_must_divide_dp() -> None:
    with pytest.raises(UsageError, match="--ep 3 does not divide dp = 4"):
        mesh_module.main(4, 1, 1, 1, ep=3)


def test_groups_as_arithmetic_for_every_shape_up_to_24_ranks() -> None:
    count = 0
    for shape in shapes(24):
        count += 1
        for axis in (*AXES, "dp_cp"):
            assert group_ranks(axis, shape) == brute_force(axis, shape), (axis, shape)
        grid = itertools.product(*(range(n) for n in shape))
        assert [tuple(coordinates(r, shape)) for r in range(math.prod(shape))] == list(
            grid
        )
        assert all(len(line) <= 88 for line in describe(shape).splitlines())
    assert count > 400  # the sweep really ran over many shapes
    mesh_module.check_arithmetic((2, 3, 2, 2))


def test_describe_draws_the_grid() -> None:
    lines = describe((2, 2, 1, 2)).splitlines()
    assert lines[2].split() == ["dp", "0", "[0", "1]", "[2", "3]"]
    assert lines[3].split() == ["dp", "1", "[4", "5]", "[6", "7]"]
    assert "{0,2} {1,3} {4,6} {5,7}" in next(x for x in lines if x.startswith("pp"))
    assert "[0 1][2 3]" in describe((1, 1, 2, 2))


def built() -> dict:
    out = {
        "main": mesh_module.main(2, 1, 1, 2)
    }  # builds the mesh, checks by all-reduce
    pipe = Mesh(1, 2, 1, 2)
    out["pipe"] = {
        "seen": mesh_module.check_groups(pipe),
        "coordinates": tuple(pipe.coordinates()),
        "of_3": tuple(pipe.coordinates(3)),
        "first_last": (pipe.pp_is_first_stage, pipe.pp_is_last_stage),
        "prev_next": (pipe.pp_prev_rank, pipe.pp_next_rank),
        "tp_rank": pipe.tp_rank,
    }
    out["device_mesh"] = {}
    for shape in ((2, 1, 1, 2), (1, 2, 1, 2)):
        torch_mesh = init_device_mesh("cpu", shape, mesh_dim_names=AXES)
        out["device_mesh"][shape] = {
            a: dist.get_process_group_ranks(torch_mesh.get_group(a)) for a in AXES
        }
    out["experts"] = [mesh_module.main(*s, ep=2) for s in ((4, 1, 1, 1), (2, 1, 1, 2))]
    torch_mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("expert_dp", "ep"))
    out["device_mesh_experts"] = {
        a: dist.get_process_group_ranks(torch_mesh.get_group(a))
        for a in ("expert_dp", "ep")
    }
    try:
        mesh_module.main(3, 1, 1, 1)
    except UsageError as error:
        out["usage"] = str(error)
    return out


@pytest.fixture(scope="module")
def results() -> list[dict]:
    return launch(built, 4, "gloo", timeout_s=60)


def test_built_groups_match_arithmetic_and_device_mesh(results) -> None:
    for rank, r in enumerate(results):
        main = r["main"]
        assert main["built"] and main["mesh"] == {
            **dict(zip(AXES, (2, 1, 1, 2))),
            "rank": rank,
            **{"dp_rank": rank // 2, "pp_rank": 0, "cp_rank": 0, "tp_rank": rank % 2},
        }
        for axis in (*AXES, "dp_cp"):
            mine = next(g for g in brute_force(axis, (2, 1, 1, 2)) if rank in g)
            assert main["groups"][axis] == mine
            mine = next(g for g in brute_force(axis, (1, 2, 1, 2)) if rank in g)
            assert r["pipe"]["seen"][axis] == mine
        for shape, torch_groups in r["device_mesh"].items():
            for axis in AXES:
                mine = next(g for g in brute_force(axis, shape) if rank in g)
                assert torch_groups[axis] == mine, (shape, axis)


def test_built_expert_groups_match_arithmetic_and_device_mesh(results) -> None:
    for rank, r in enumerate(results):
        for shape, main in zip(((4, 1, 1, 1), (2, 1, 1, 2)), r["experts"]):
            dp_rank = main["mesh"]["dp_rank"]
            assert (main["mesh"]["ep"], main["mesh"]["ep_rank"]) == (2, dp_rank % 2)
            for axis in ("ep", "expert_dp"):
                mine = next(g for g in brute_force_experts(axis, shape, 2) if rank in g)
                assert main["groups"][axis] == mine, (shape, axis)
        for axis, ranks in r["device_mesh_experts"].items():  # dp 4 = (2, ep 2)
            assert r["experts"][0]["groups"][axis] == ranks, axis


def test_pipeline_neighbours_and_stages(results) -> None:
    # 1x2x1x2: stage 0 is ranks 0, 1; stage 1 is ranks 2, 3
    for rank, r in enumerate(results):
        pipe = r["pipe"]
        stage = rank // 2
        assert pipe["coordinates"] == (0, stage, 0, rank % 2)
        assert pipe["of_3"] == (0, 1, 0, 1)
        assert pipe["first_last"] == (stage == 0, stage == 1)
        other = (rank + 2) % 4  # two stages: the previous and the next are one rank
        assert pipe["prev_next"] == (other, other)
        assert pipe["tp_rank"] == rank % 2


def test_wrong_product_is_one_line(results) -> None:
    message = results[0]["usage"]
    assert message.startswith("dp·pp·cp·tp = 3·1·1·1 = 3 but the world has 4 ranks")
    assert "\n" not in message


def test_plan_in_one_process(capsys) -> None:
    assert mesh_module.main(1, 2, 2, 2) == {
        "mesh": {"dp": 1, "pp": 2, "cp": 2, "tp": 2},
        "built": False,
    }
    assert "dp 0  [0 1][2 3]  [4 5][6 7]" in capsys.readouterr().out
