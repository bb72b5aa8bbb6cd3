"""Process groups: the world and each sub-group all-reduce to what arithmetic says."""

from __future__ import annotations

import pytest

from snippets.comm import process_groups
from snippets.core.runtime import launch


@pytest.mark.parametrize("p", [1, 3, 5])
def test_world_and_subgroup_sums(p: int) -> None:
    result = launch(process_groups.main, p, backend="gloo", timeout_s=30)[0]
    assert result["world_sum"] == sum(range(p))
    rows = result["tables"]["ranks"]
    assert [row["rank"] for row in rows] == list(range(p))
    for row in rows:
        members = [r for r in range(p) if r % 2 == row["rank"] % 2]
        assert row["group_sum"] == sum(members)
        assert row["group_size"] == len(members)
        assert row["group_rank"] == members.index(row["rank"])
