"""The player's shared parts on frames written by hand: labels name ranks as ranges,
a frame's values are the sums of the inputs its cells name, the data carries one
colour and one row per rank and the last frame's labels, the final-frame check fails
on a frame that disagrees with the oracle or with the run (and ignores undefined
cells), and the figure a note includes is one HTML block whose JSON survives the
round trip."""

from __future__ import annotations

import json
import re

import pytest

from snippets.core import parts
from snippets.core.chart_style import PALETTE
from snippets.core.player import check_animation, frame_values, label, player_data
from snippets.render import render

# two ranks, two cells: rank 1 adds its cell 0 into rank 0's, then rank 0 copies back
INPUTS = [[1.0, 2.0], [10.0, 20.0]]
FRAMES = [
    {"label": "start", "messages": [], "cells": [[[0], [0]], [[1], [1]]]},
    {
        "label": "add",
        "messages": [
            {"src": 1, "dst": 0, "start": 0, "stop": 1, "bytes": 8, "action": "add"}
        ],  # fmt: skip
        "cells": [[[0, 1], [0]], [[1], [1]]],
    },
    {
        "label": "copy",
        "messages": [
            {"src": 0, "dst": 1, "start": 0, "stop": 1, "bytes": 8, "action": "copy"}
        ],  # fmt: skip
        "cells": [[[0, 1], [0]], [[0, 1], [1]]],
    },
]
FINAL = [[11.0, 2.0], [11.0, 20.0]]  # worked out by hand from the messages


def test_labels_name_ranks_as_ranges() -> None:
    assert label([0, 1, 2, 4]) == "0–2,4"
    assert label([0, 1]) == "0,1"
    assert label([3]) == "3"
    assert label([1, 1]) == "1,1"  # added twice shows twice
    assert label([0, 2, 3, 4, 5, 7]) == "0,2–5,7"
    assert label([]) == ""


def test_frame_values_sum_the_inputs_a_cell_names() -> None:
    assert frame_values(FRAMES[-1]["cells"], INPUTS) == FINAL
    assert frame_values([[[], [0, 1]]], INPUTS) == [[None, 22.0]]


def test_the_data_has_a_row_and_a_colour_per_rank() -> None:
    anim = player_data(FRAMES, INPUTS, FINAL, "t", slots=["a", "b"])
    assert (anim["ranks"], anim["numel"]) == (2, 2)
    assert anim["colors"] == PALETTE[:2]
    assert anim["final_labels"] == [["0,1", "0"], ["0,1", "1"]]
    assert anim["frames"] is FRAMES and anim["slots"] == ["a", "b"]
    assert "slots" not in player_data(FRAMES, INPUTS, FINAL, "t")


def test_the_last_frame_must_equal_the_oracle_and_the_run() -> None:
    check_animation(player_data(FRAMES, INPUTS, FINAL, "t"), FINAL)
    check_animation(player_data(FRAMES, INPUTS, FINAL, "t"), [[11.0, None]] * 2)
    wrong = [[11.0, 2.0], [10.0, 20.0]]  # as if the copy never arrived
    with pytest.raises(AssertionError, match="≠ the oracle .*rank 1 element 0"):
        check_animation(player_data(FRAMES, INPUTS, FINAL, "t"), wrong)
    with pytest.raises(AssertionError, match="≠ the run"):
        check_animation(player_data(FRAMES, INPUTS, wrong, "t"), FINAL)
    recorded = dict(FRAMES[-1], values=[[11.0, 2.0], [11.0, 99.0]])
    with pytest.raises(AssertionError, match="drawn 99.0"):  # values win over sums
        check_animation(
            player_data([*FRAMES[:-1], recorded], INPUTS, FINAL, "t"), FINAL
        )


def test_the_figure_is_one_html_block_with_its_animation_inline() -> None:
    anim = player_data(FRAMES, INPUTS, FINAL, "a </script> & b")
    page = render(parts.player(anim))
    assert page.startswith('<figure class="cp-player">') and "\n\n" not in page
    assert page.count("</script>") == 1 and "a &lt;/script&gt; &amp; b" in page
    inline = re.search(r'class="cp-player__trace">(.*?)</script>', page).group(1)
    assert json.loads(inline.replace("<\\/", "</")) == json.loads(json.dumps(anim))
