"""Chart style: every colour the charts draw, worked through WCAG 2's contrast formula
against the background it is drawn on; DARK only overrides keys LIGHT has. Numbers
are written as a person writes them (checked against hand-written labels, with
d3-format's rules written out here), log ticks are evenly spaced, and a title is one
line wherever the plot is wide enough."""

from __future__ import annotations

import json
import math
import re
from types import SimpleNamespace

import pytest

from snippets.core import chart_style as cs


def _luminance(hex_colour: str) -> float:
    """WCAG 2 relative luminance: linearise each sRGB channel, weight 0.2126 R +
    0.7152 G + 0.0722 B."""
    h = hex_colour.lstrip("#")
    lin = []
    for i in (0, 2, 4):
        c = int(h[i : i + 2], 16) / 255
        lin.append(c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4)
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def _ratio(a: str, b: str) -> float:
    la, lb = _luminance(a), _luminance(b)
    return (max(la, lb) + 0.05) / (min(la, lb) + 0.05)


def test_formula_on_hand_worked_pairs():
    assert _ratio("#ffffff", "#000000") == pytest.approx(21.0)
    # #808080: c = 128/255, ((c + .055)/1.055)^2.4 = 0.2159; (1.05)/(0.2659) = 3.95
    assert _ratio("#808080", "#ffffff") == pytest.approx(3.949, abs=2e-3)
    assert _ratio(cs.LIGHT_BACKGROUND, cs.LIGHT_BACKGROUND) == pytest.approx(1.0)


@pytest.mark.parametrize("bg", [cs.LIGHT_BACKGROUND, cs.DARK_BACKGROUND])
def test_palette_keeps_the_3_3_promised_in_the_module(bg):
    low = {c: round(_ratio(c, bg), 2) for c in cs.PALETTE if _ratio(c, bg) < 3.3}
    assert not low, f"below 3.3 on {bg}: {low}"
    assert len(set(cs.PALETTE)) == len(cs.PALETTE)


def _colours(cfg: dict) -> dict[str, str]:
    return {
        f"{part}.{key}": val
        for part, sub in cfg.items()
        if isinstance(sub, dict)
        for key, val in sub.items()
        if key in ("color", "labelColor", "titleColor")  # text, not rules
    }


def test_text_reaches_4_5_on_its_own_scheme():
    """WCAG AA for text: titles and labels at 4.5:1 on the page they are shown on."""
    for cfg, bg in ((cs.LIGHT, cs.LIGHT_BACKGROUND), (cs.DARK, cs.DARK_BACKGROUND)):
        texts = _colours(cfg)
        assert texts, "no text colours found"
        low = {
            k: round(_ratio(c, bg), 2) for k, c in texts.items() if _ratio(c, bg) < 4.5
        }
        assert not low, f"on {bg}: {low}"


def test_dark_overrides_only_what_light_sets():
    for part, sub in cs.DARK.items():
        assert set(sub) <= set(cs.LIGHT[part]), part
        for key, val in sub.items():
            assert val != cs.LIGHT[part][key], f"{part}.{key} is not overridden"


# --- numbers as a person writes them ---


def _d3(x: float, spec: str) -> str:
    """d3-format's ".Nr" and ".Ns" with "~" (trailing zeros dropped), written out
    from its documentation: N significant digits in fixed notation; "s" adds an SI
    prefix (k, M, G) to the mantissa."""
    digits, kind = int(spec[1:-2]), spec[-1]
    prefix = ""
    if kind == "s":
        power = min(int(math.floor(math.log10(abs(x)) / 3)), 4) if x else 0
        x, prefix = x / 1000**power, ["", "k", "M", "G", "T"][power]
    if x == 0:
        return "0"
    places = max(0, digits - 1 - math.floor(math.log10(abs(x))))
    text = f"{round(x, places):.{places}f}"
    return (text.rstrip("0").rstrip(".") if "." in text else text) + prefix


def label(expr: str, value: float) -> str:
    """A label expression of ``number_expr`` evaluated in Python: a chain of
    ``cond ? text : …`` in ``datum.value``."""
    parts = re.split(r" \? | : ", expr)
    env = {"abs": abs, "format": _d3, "datum": SimpleNamespace(value=value)}
    while len(parts) > 1:
        cond, then, *parts = parts
        if eval(cond.replace("===", "=="), env):
            return eval(then, env)
    return eval(parts[0], env)


@pytest.mark.parametrize(
    ("unit", "values", "written"),
    [
        ("B", [8, 1000, 4096, 65536, 1.5 * 2**20, 2**33], ["8 B", "1000 B", "4 KiB",
         "64 KiB", "1.5 MiB", "8 GiB"]),
        ("MiB", [0.5, 1, 3000], ["512 KiB", "1 MiB", "2.93 GiB"]),
        ("s", [0, 2e-5, 7e-4, 1e-3, 0.0125, 1.5, 3e-9],
         ["0", "20 µs", "700 µs", "1 ms", "12.5 ms", "1.5 s", "3 ns"]),
        ("ms", [0.5, 40, 1200], ["500 µs", "40 ms", "1.2 s"]),
        (None, [0.25, 10, 70, 150, 12500, 3e6], ["0.25", "10", "70", "150", "12.5k",
         "3M"]),
    ],
)  # fmt: skip
def test_numbers_read_as_a_person_writes_them(unit, values, written):
    expr = cs.number_expr("datum.value", unit)
    assert [label(expr, v) for v in values] == written
    assert "e+" not in expr


def test_a_unit_it_does_not_know_is_refused():
    with pytest.raises(ValueError, match="unit 'KB'"):
        cs.number_expr("datum.value", "KB")


@pytest.mark.parametrize(
    ("lo", "hi", "unit", "most", "ticks"),
    [
        (8, 8 * 2**20, "B", 6, [16, 256, 4096, 65536, 2**20]),  # 2^4 … 2^20 by 4
        (8, 2**28, "B", 6, [32, 1024, 32768, 2**20, 2**25]),  # by 5
        (1, 2**40, "B", 6, [1, 2**10, 2**20, 2**30, 2**40]),  # by 10
        (7e-5, 4e-2, "s", 5, [1e-4, 1e-3, 1e-2]),  # 1-2-5 gives 8, 1-3 six
        (1.2e-5, 2.5e-3, "s", 5, [3e-5, 1e-4, 3e-4, 1e-3]),  # 1-3
        (20, 200, None, 5, [20, 50, 100, 200]),
        (3, 60, "ms", 6, [5, 10, 20, 50]),  # ms: decades of seconds
        (1e-6, 1e3, None, 5, [1e-6, 1e-4, 1e-2, 1, 100]),  # every second decade
        (1e-6, 1e3, None, 4, [1e-6, 1e-3, 1, 1e3]),  # every third
    ],
)  # fmt: skip
def test_log_ticks_are_evenly_spaced(lo, hi, unit, most, ticks):
    assert cs.log_ticks(lo, hi, unit, most) == pytest.approx(ticks)


def test_byte_ticks_are_powers_of_two_one_step_apart():
    for lo, hi in ((8, 2**23), (100, 10**9), (3, 5000), (2**10, 2**12)):
        ticks = cs.log_ticks(lo, hi, "B", 6)
        exps = [math.log2(t) for t in ticks]
        assert 2 <= len(ticks) <= 6 and all(e == int(e) for e in exps), ticks
        assert len({b - a for a, b in zip(exps, exps[1:])}) == 1, ticks
        assert lo <= ticks[0] and ticks[-1] <= hi


def test_too_narrow_a_domain_leaves_the_ticks_to_the_axis():
    assert cs.log_ticks(1.1, 1.9, None, 5) == []
    with pytest.raises(ValueError, match="0 < lo"):
        cs.log_ticks(0, 1, None, 5)


def title_at(expr: str, width: float) -> list[str]:
    """The lines ``wrapped_title``'s expression picks at a plot ``width``."""
    while expr.startswith("width >= "):
        need, rest = expr[len("width >= ") :].split(" ? ", 1)
        lines, end = json.JSONDecoder().raw_decode(rest)
        if width >= float(need):
            return lines
        expr = rest[end:].removeprefix(" : ")
    return json.loads(expr)


def test_a_title_is_one_line_where_it_fits_and_wraps_where_not():
    text = "Predicted all-reduce on 64 ranks with this machine's α, β, γ"  # 60 chars
    expr = cs.wrapped_title(text)["expr"]
    assert title_at(expr, 688) == [text]  # the page's width: one line
    assert title_at(expr, 60 * cs.TITLE_CHAR_PX) == [text]
    phone = title_at(expr, 300)
    assert " ".join(phone) == text and len(phone) == 2
    assert all(len(line) <= cs.TITLE_WIDTH for line in phone)
    for width in range(100, 700, 7):  # a line never wider than the plot, if it can be
        lines = title_at(expr, width)
        fits = max(map(len, lines)) * cs.TITLE_CHAR_PX <= width
        assert fits or max(map(len, lines)) <= cs.TITLE_WIDTH, (width, lines)
