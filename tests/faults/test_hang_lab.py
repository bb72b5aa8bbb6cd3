"""The hang lab against facts worked out from each program by hand: which rank fails,
the marked line each rank stops on, what monitored_barrier and DETAIL say, and no
process left behind."""

from __future__ import annotations

import os
import re
from pathlib import Path

from conftest import process_children

from snippets.faults import hang_lab

SOURCE = Path(hang_lab.__file__)


def line_of(marker: str) -> int:
    lines = SOURCE.read_text().splitlines()
    return next(i for i, t in enumerate(lines, 1) if t.endswith(f"# {marker}"))


def test_a_rank_one_call_ahead_fails_at_its_extra_call_and_nothing_is_left() -> None:
    # rank 0 runs 3 all_reduces, rank 1 two and then sleeps before its barrier: rank
    # 0's third all_reduce is the first wait to start, so its timeout ends first
    err = hang_lab.run(hang_lab.one_more_all_reduce)
    assert err.rank == 0
    assert f'hang_lab.py", line {line_of("BROKEN extra 0")},' in err.remote_traceback
    assert "Timed out" in err.cause
    assert process_children(os.getpid()) == []


def test_crossed_receives_time_out_on_the_rank_that_waits_first() -> None:
    err = hang_lab.run(hang_lab.crossed)
    assert err.rank == 0  # rank 1 sleeps before its recv
    line = line_of("BROKEN crossed: both ranks receive first")
    assert f'hang_lab.py", line {line},' in err.remote_traceback
    stack = err.stacks.get(1, "")
    if "hang_lab.py" in stack:  # asked while waiting, or failed too: the same recv
        assert re.search(rf'hang_lab.py", line {line},? in crossed', stack), stack
    assert process_children(os.getpid()) == []


def test_monitored_barrier_names_the_rank_that_skipped_it() -> None:
    err = hang_lab.run(hang_lab.skipped_barrier, (True,))
    assert err.rank == 0
    assert re.search(r"Rank 1 failed to pass monitoredBarrier", err.cause)
    assert process_children(os.getpid()) == []


def test_detail_reports_the_mismatch_and_the_environment_is_restored() -> None:
    before = os.environ.get("TORCH_DISTRIBUTED_DEBUG")
    err = hang_lab.run(hang_lab.different_shapes_detail, detail=True)
    assert "Detected mismatch between collectives" in err.cause
    assert os.environ.get("TORCH_DISTRIBUTED_DEBUG") == before


def test_where_reads_both_the_stack_and_the_traceback_formats() -> None:
    stack = 'Current thread:\n  File "/x/hang_lab.py", line 12 in f\n  File "/y.py"'
    tb = 'Traceback (most recent call last):\n  File "/x/hang_lab.py", line 3, in g\n'
    tb += '  File "/x/hang_lab.py", line 9, in h\n'
    assert hang_lab.where(stack) == (12, "f")
    assert hang_lab.where(tb) == (9, "h")
    assert hang_lab.where("no frames") is None
