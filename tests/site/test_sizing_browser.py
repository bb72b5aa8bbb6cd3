"""The sizing calculator in the built site, in Chromium, with every other host refused:
on random configurations (seeded) the page shows what ``python -m snippets size
--json`` prints, to 1e-9 relative, and the command's own one line where it refuses;
its link restores the configuration; the keyboard drives it; it fits a phone and
takes the page's colours in both schemes. One page load for the random sweep: each
configuration goes in through ``cpSizing.apply(argv)``, which sets the form."""

from __future__ import annotations

import io
import json
import math
import random
from contextlib import redirect_stderr, redirect_stdout
from urllib.parse import quote

import pytest
from test_browser import browser, contrast, note_url, open_page, served  # noqa: F401

from snippets.__main__ import main as cli_main
from snippets.sizing import presets
from snippets.sizing.sizing_widget import options, read_back, widget_data

pytestmark = pytest.mark.browser

MARKER = 'class="cp-sizing"'
VALID, INVALID = 110, 15  # configurations the sweep compares
READ_PAGE = """() => {
  const fig = document.querySelector('figure.cp-sizing');
  const value = (sel) => Number(fig.querySelector(sel).dataset.value);
  const segs = (i) => [...fig.querySelectorAll('.cp-sizing__bar')[i]
    .querySelectorAll('.cp-sizing__seg')];
  const parts = (i) => Object.fromEntries(segs(i).map(s => [s.dataset.part,
    Number(s.dataset.value)]));
  return {error: fig.querySelector('.cp-sizing__error').hidden ? null
            : fig.querySelector('.cp-sizing__error').textContent,
          tokens: value('dd[data-key=tokens_per_s]'), mfu: value('dd[data-key=mfu]'),
          step: value('dd[data-key=step_time_s]'),
          fits: fig.querySelector('dd[data-key=fits]').dataset.fits === 'true',
          memory: parts(0), time: parts(1)};
}"""


def cli(argv: list[str]) -> tuple[dict | None, str | None]:
    """The command's JSON, or the one line it prints on stderr: in process."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = cli_main(["size", *argv, "--json"])
        except SystemExit as exited:  # the parser's own refusals exit
            code = exited.code
    if code == 0:
        return json.loads(out.getvalue()), None
    assert code == 2 and len(err.getvalue().strip().splitlines()) == 1, err.getvalue()
    return None, err.getvalue().strip()


def random_argv(rng: random.Random) -> list[str]:
    """A configuration as the page writes it: only options off their default, in the
    parser's order. Mostly valid by construction; now and then one thing is off."""
    given: dict[str, str | None] = {}
    kind = rng.random()
    if kind < 0.7:
        name = rng.choice(list(presets.MODELS))
        model = dict(presets.MODELS[name])
        given["--preset"] = name
        if rng.random() < 0.2:
            model["layers"] = rng.choice([4, 8, 16])
            given["--layers"] = str(model["layers"])
    elif kind < 0.9:
        arch = rng.choice(["gpt", "llama"])
        a = rng.choice([4, 8, 12, 16])
        h = a * rng.choice([16, 32, 64])
        kv = a if arch == "gpt" else rng.choice([d for d in (1, 2, 4, a) if a % d == 0])
        model = dict(arch=arch, heads=a, hidden=h, kv_heads=kv)
        model["layers"] = rng.choice([2, 4, 6, 8, 12])
        model["vocab"] = rng.choice([1000, 32000, 50257])
        model["ffn"] = rng.choice([4 * h, 3 * h, 8 * h])
        model["seq"] = rng.choice([256, 1024, 4096])
        for key in ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "seq"):
            given["--" + key.replace("_", "-")] = str(model[key])
        if arch == "llama":
            given["--arch"] = "llama"
    else:
        model = {"heads": 1, "kv_heads": 1, "ffn": 1, "layers": 1, "seq": 2048}
        given |= {"--params": rng.choice(["7.5e9", "1.3e8", "7e10"]), "--seq": "2048"}
    if kind < 0.9:
        tps = [t for t in (1, 2, 4, 8) if model["heads"] % t == model["kv_heads"] % t
               == model["ffn"] % t == 0]  # fmt: skip
        pps = [p for p in (1, 2, 4) if model["layers"] % p == 0]
        t, p, cp = rng.choice(tps), rng.choice(pps), rng.choice([1, 1, 2])
    else:
        t = p = cp = 1
    v = 2 if p > 1 and model["layers"] % (2 * p) == 0 and rng.random() < 0.4 else 1
    dp, b = rng.choice([1, 2, 4, 8, 64]), rng.choice([1, 1, 2, 4])
    m = rng.choice([1, 2, 4, 8]) * (p if v > 1 else 1)
    for flag, value, default in (
        ("--tp", t, 1), ("--pp", p, 1), ("--vpp", v, 1), ("--cp", cp, 1),
        ("--dp", dp, 1), ("--micro-batch", b, 1),
    ):  # fmt: skip
        if value != default:
            given[flag] = str(value)
    if m > 1:
        given["--global-batch"] = str(m * b * dp)
    if rng.random() < 0.2:
        given["--gpus"] = str(dp * t * p * cp)
    picks = {
        "--zero": ["1", "2", "3"], "--recompute": ["selective", "full"],
        "--precision": ["fp32"], "--optimizer": ["sgd"], "--grad-bytes": ["2", "4"],
        "--gpu": [g for g in presets.GPUS if g != "h100-sxm"],
        "--gpus-per-node": ["4", "16"], "--intra-link": ["pcie"],
        "--efficiency": ["0.35", "0.7", "1"], "--overlap": ["0.5", "1", "0.25"],
    }  # fmt: skip
    for flag, values in picks.items():
        if rng.random() < 0.4:
            given[flag] = rng.choice(values)
    for flag in ("--sequence-parallel", "--no-flash", "--causal-halving"):
        if rng.random() < 0.3:
            given[flag] = None
    if rng.random() < 0.12:  # one impossible input
        flag, value = rng.choice(
            [("--tp", "3"), ("--gpus", "7"), ("--seq", "1001"), ("--global-batch", "3"),
             ("--vpp", "3"), ("--efficiency", "1.5"), ("--dp", "0"), ("--tp", "1.5")]
        )  # fmt: skip
        given[flag] = value
    argv = []
    for o in options():
        if o["flag"] in given:
            value = given[o["flag"]]
            argv += [o["flag"]] if value is None else [o["flag"], value]
    return argv


def assert_close(js, py, where: str) -> None:
    """Every field of the JSON: numbers to 1e-9 relative, everything else equal."""
    if isinstance(py, dict):
        assert isinstance(js, dict) and set(js) == set(py), (where, js, py)
        for key in py:
            assert_close(js[key], py[key], f"{where}.{key}")
    elif isinstance(py, bool) or py is None or isinstance(py, str):
        assert js == py, (where, js, py)
    else:
        assert isinstance(js, (int, float)) and not isinstance(js, bool), (where, js)
        assert math.isclose(js, py, rel_tol=1e-9, abs_tol=0), (where, js, py)


def sizing_url(served, built_site) -> str:  # noqa: F811
    return note_url(served, built_site, MARKER)


def test_page_equals_the_cli_on_random_configurations(
    open_page,  # noqa: F811
    served,  # noqa: F811
    built_site,
) -> None:
    rng = random.Random(20261201)
    cases, valid, invalid = [], 0, 0
    while valid < VALID or invalid < INVALID:
        argv = random_argv(rng)
        found, line = cli(argv)
        if (found is None and invalid >= INVALID) or (found and valid >= VALID):
            continue
        valid, invalid = valid + (found is not None), invalid + (found is None)
        cases.append((argv, found, line))
    page = open_page(width=390)  # the sweep runs on a phone's width
    page.goto(sizing_url(served, built_site))
    page.wait_for_function("() => window.cpSizing && window.cpSizing.last().result")
    shown = page.evaluate(
        "cases => cases.map(a => { const r = cpSizing.apply(a);"
        " return [r, (" + READ_PAGE + ")()]; })",
        [argv for argv, _, _ in cases],
    )
    for (argv, found, line), (js, read) in zip(cases, shown):
        where = " ".join(argv)
        assert js["argv"] == argv, where  # the form holds exactly this configuration
        assert js["error"] == line and read["error"] == line, (where, js["error"], line)
        if found is None:
            continue
        assert_close(js["result"], found, where)
        for key, value in (
            ("tokens", "tokens_per_s"),
            ("mfu", "mfu"),
            ("step", "step_time_s"),
        ):
            assert math.isclose(read[key], found[value], rel_tol=1e-9), (where, key)
        assert read["fits"] == found["fits"], where
        mem = {k: v for k, v in found["memory_bytes"].items() if k != "total" and v > 0}
        assert read["memory"] == pytest.approx(mem, rel=1e-9), where
        time = read["time"]  # compute, bubble, and what communication is exposed
        assert time["compute"] == pytest.approx(found["compute_seconds_per_step"])
        assert sum(time.values()) == pytest.approx(found["step_time_s"], rel=1e-9)
    check_colours(page, "default")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    assert not page.foreign and not page.errors, (page.foreign, page.errors)


def test_page_data_is_the_python_presets(built_site) -> None:
    pages = [p.read_text(encoding="utf-8") for p in built_site.rglob("index.html")]
    pages = [text for text in pages if MARKER in text]
    assert len(pages) == 1  # the sizing note, and nothing else loads the widget
    assert read_back(pages[0]) == json.loads(json.dumps(widget_data()))


def query(argv: list[str]) -> str:
    """The query string that holds argv: ``?preset=llama3-8b&dp=8&no-flash``."""
    switches = {o["flag"] for o in options() if o["switch"]}
    parts, rest = [], iter(argv)
    for flag in rest:
        key = flag.removeprefix("--")
        parts.append(key if flag in switches else f"{key}={quote(next(rest))}")
    return "?" + "&".join(parts)


def test_link_restores_keyboard_drives_and_bad_input_says_the_cli_line(
    open_page,  # noqa: F811
    served,  # noqa: F811
    built_site,
) -> None:
    argv = "--preset llama3-70b --seq 4096 --global-batch 64 --dp 4 --tp 8 --pp 2 "
    argv += "--vpp 2 --zero 1 --sequence-parallel --no-flash --gpu h200 --overlap 0.5"
    argv = argv.split()
    page = open_page(width=390, scheme="dark")
    page.goto(sizing_url(served, built_site) + query(argv) + "#calculator")
    page.wait_for_function("() => window.cpSizing && window.cpSizing.last().result")
    names = page.locator("select[name=preset] option").evaluate_all(
        "els => els.map(e => e.value)"
    )
    assert names == [*presets.MODELS, "custom", "params"]
    shown = page.evaluate("() => cpSizing.last()")
    assert shown["argv"] == argv  # the link restored the configuration
    assert_close(shown["result"], cli(argv)[0], "link")
    assert (
        page.get_attribute("a.cp-sizing__link", "href") == query(argv) + "#calculator"
    )

    page.focus("input[name=cp]")  # by keyboard: cp 1 → 2 changes the page and URL
    page.keyboard.press("ArrowUp")
    now = page.evaluate("() => cpSizing.last()")
    at = argv.index("--vpp") + 2
    assert now["argv"] == argv[:at] + ["--cp", "2"] + argv[at:]
    assert_close(now["result"], cli(now["argv"])[0], "keyboard")
    assert page.evaluate("location.search") == query(now["argv"])

    page.fill("input[name=tp]", "3")  # 64 heads do not split 3 ways
    bad = page.evaluate("() => cpSizing.last()")
    found, line = cli(bad["argv"])
    assert found is None and line.startswith("error: --heads 64 is not divisible")
    error = page.locator(".cp-sizing__error")
    assert error.is_visible() and error.inner_text() == line
    check_colours(page, "slate")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    assert not page.foreign and not page.errors, (page.foreign, page.errors)


# The colours the widget draws: its background, text, bar segments and swatches.
COLOURS = """() => {
  const fig = document.querySelector('figure.cp-sizing');
  let el = fig, bg = 'rgba(0, 0, 0, 0)';
  while (el && /rgba\\(.*, 0\\)|transparent/.test(bg)) {
    bg = getComputedStyle(el).backgroundColor; el = el.parentElement;
  }
  const all = (sel, prop) => [...fig.querySelectorAll(sel)]
    .map(e => getComputedStyle(e)[prop]).filter(c => !/rgba\\(.*, 0\\)/.test(c));
  return [bg, document.body.dataset.mdColorScheme,
          all('.cp-sizing__seg, .cp-sizing__legend .cp-sizing__swatch',
              'backgroundColor'),
          all('dd, legend, .cp-sizing__legend li, input, select, td',  'color'),
          all('input, select', 'backgroundColor'),
          getComputedStyle(fig.querySelector('.cp-sizing__error')).color];
}"""


def check_colours(page, material: str) -> None:
    """Material's scheme is on; an error, the text and the fields hold 4.5:1, the
    bars 3:1, and the fields take the page's background (no white box on slate)."""
    page.evaluate("() => cpSizing.apply(['--preset', 'gpt2-124m', '--tp', '5'])")
    bg, seen, _, _, _, error = page.evaluate(COLOURS)
    assert seen == material
    assert contrast(error, bg) >= 4.5, (error, bg)
    page.evaluate("() => cpSizing.apply(['--preset', 'gpt2-124m', '--zero', '3'])")
    bg, _, parts, texts, fields, _ = page.evaluate(COLOURS)
    low = [f"part {c}" for c in set(parts) if contrast(c, bg) < 3]
    low += [f"text {c}" for c in set(texts) if contrast(c, bg) < 4.5]
    low += [f"field {c}" for c in set(fields) if contrast(c, bg) > 1.5]
    assert parts and texts and fields and not low, (bg, low)
