"""Tests for snippets.attention.flash_tiles: the sweep times every shape, and the
sentence about the defaults says what the spread shows, not what the medians suggest."""

from __future__ import annotations

from conftest import refused

from snippets.attention import flash_tiles as ft
from snippets.attention.flash_algorithms import BLOCK_K, BLOCK_Q
from snippets.core.claims import Spread
from snippets.core.cli import OneLineParser

DEFAULT = (BLOCK_Q, BLOCK_K)


def spreads(default: Spread, others: Spread) -> dict:
    return {
        (bq, bk): default if (bq, bk) == DEFAULT else others
        for bq in ft.TILES
        for bk in ft.TILES
    }


def test_the_defaults_are_placed_by_the_spread():
    ms = 1e-3
    _, text = ft.tile_findings(
        spreads(Spread(10 * ms, 9 * ms, 11 * ms), Spread(20 * ms, 19 * ms, 21 * ms)), 5
    )
    assert f"fastest median is {BLOCK_Q}×{BLOCK_K}, 10.0 [9.0–11.0] ms" in text
    assert "within its spread: none" in text and "are the fastest median" in text
    # another shape has the lower median, but the ranges overlap
    shapes = spreads(
        Spread(10 * ms, 8 * ms, 12 * ms), Spread(20 * ms, 19 * ms, 21 * ms)
    )
    shapes[128, 128] = Spread(9 * ms, 7 * ms, 11 * ms)
    rows, text = ft.tile_findings(shapes, 5)
    assert "fastest median is 128×128" in text
    assert f"within its spread: {BLOCK_Q}×{BLOCK_K}." in text
    assert "are within the fastest's spread" in text
    # and beyond it
    shapes[128, 128] = Spread(5 * ms, 4 * ms, 6 * ms)
    _, text = ft.tile_findings(shapes, 5)
    assert "slower than the fastest beyond the spread" in text
    # many within the spread: counted, not listed
    wide = spreads(Spread(10 * ms, 5 * ms, 15 * ms), Spread(11 * ms, 6 * ms, 16 * ms))
    _, text = ft.tile_findings(wide, 5)
    assert "within its spread: 15 of the other 15 shapes." in text
    assert len(rows) == len(ft.TILES) and len(rows[0]) == len(ft.TILES) + 1


def test_the_sweep_times_every_shape():
    got = ft.tile_sweep(rounds=1, N=128, d=32)
    assert set(got) == {(bq, bk) for bq in ft.TILES for bk in ft.TILES}
    assert all(0 < s.lo <= s.median <= s.hi for s in got.values())


def test_bad_rounds_is_one_line_and_exit_2(capfd):
    parser = OneLineParser(prog="python -m snippets run flash_tiles")
    ft.add_arguments(parser)
    for bad in ("0", "-1", "x"):
        assert "--rounds" in refused(["--rounds", bad], capfd, entry=parser.parse_args)
