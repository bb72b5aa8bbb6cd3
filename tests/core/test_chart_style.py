"""Chart style: every colour the charts draw, worked through WCAG 2's contrast formula
against the background it is drawn on; and DARK only overrides keys LIGHT has."""

from __future__ import annotations

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
