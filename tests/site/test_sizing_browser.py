"""The sizing calculator in the built site, in Chromium, with every other host refused:
on random configurations (seeded) the page shows what ``python -m snippets size
--json`` prints, to 1e-9 relative, its warnings word for word, and where the command
refuses, its one line beside the fields it names; its link restores the
configuration; the keyboard drives it; the results stay in view while a field
changes, at 1280×900 and on a 390 px phone; a field the command refuses is marked
and nothing is recomputed until it is fixed (the figures say they are stale); it
fits a phone and takes the page's colours in both schemes. One page load for the
random sweep: each configuration goes in through ``cpSizing.apply(argv)``, which
sets the form."""

from __future__ import annotations

import io
import json
import math
import random
from contextlib import redirect_stderr, redirect_stdout
from urllib.parse import quote

import pytest
from browsing import contrast, note_url
from conftest import exit_status, refusal

from snippets.__main__ import main as cli_main
from snippets.render.fragments import read_back
from snippets.sizing import presets
from snippets.sizing.sizing_widget import options, widget_data

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
  const why = Object.fromEntries([...fig.querySelectorAll('.cp-sizing__why')]
    .map(e => [e.dataset.warning, e.textContent]));
  return {error: fig.querySelector('.cp-sizing__error').hidden ? null
            : fig.querySelector('.cp-sizing__error').textContent,
          stale: fig.querySelector('.cp-sizing__results').dataset.stale === 'true',
          why: why, held: value('dd[data-key=params_held_per_gpu]'),
          tokens: value('dd[data-key=tokens_per_s]'), mfu: value('dd[data-key=mfu]'),
          step: value('dd[data-key=step_time_s]'),
          fits: fig.querySelector('dd[data-key=fits]').dataset.fits === 'true',
          memory: parts(0), time: parts(1)};
}"""


def cli(argv: list[str]) -> tuple[dict | None, str | None]:
    """The command's JSON, or the one line it prints on stderr: in process."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        status = exit_status(cli_main, ["size", *argv, "--json"])
    if status == 0:
        return json.loads(out.getvalue()), None
    return None, refusal(status, out.getvalue(), err.getvalue())


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


def sizing_url(served, built_site) -> str:
    return note_url(served, built_site, MARKER)


def test_page_equals_the_cli_on_random_configurations(
    open_page,
    served,
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
        assert js["error"] == line, (where, js["error"], line)
        assert read["stale"] == (line is not None), where
        if found is None:  # the page's words: not recomputed, no "(see --help)"
            assert read["error"].startswith("Not recomputed. "), where
            assert "(see --help)" not in read["error"] and "error:" not in read["error"]
            continue
        assert read["error"] is None, where
        assert_close(js["result"], found, where)
        assert read["why"] == found["warnings"], where
        assert read["held"] == pytest.approx(found["params_held_per_gpu"], rel=1e-9)
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
    assert read_back(pages[0], "sizing", "data") == json.loads(
        json.dumps(widget_data())
    )


def query(argv: list[str]) -> str:
    """The query string that holds argv: ``?preset=llama3-8b&dp=8&no-flash``."""
    switches = {o["flag"] for o in options() if o["switch"]}
    parts, rest = [], iter(argv)
    for flag in rest:
        key = flag.removeprefix("--")
        parts.append(key if flag in switches else f"{key}={quote(next(rest))}")
    return "?" + "&".join(parts)


def test_link_restores_keyboard_drives_and_bad_input_says_the_cli_line(
    open_page,
    served,
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
    # beside the tp field, the command's line without "error: " and its flags'
    # dashes (tp and heads are the fields' names); the preset's heads are not marked
    assert field_state(page, "tp") == (True, line.removeprefix("error: ").replace(
        "--", ""))  # fmt: skip
    assert field_state(page, "heads") == (False, None)
    check_colours(page, "slate")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    assert not page.foreign and not page.errors, (page.foreign, page.errors)


# Is each part in the window, below Material's 48 px header, and not covered?
IN_VIEW = """sels => sels.map(sel => {
  const e = document.querySelector(`figure.cp-sizing ${sel}`);
  const r = e.getBoundingClientRect();
  const on = document.elementFromPoint(r.left + 8, (r.top + r.bottom) / 2);
  return r.height > 0 && r.top >= 48 && r.bottom <= innerHeight && e.contains(on);
})"""
CHANGES = [  # top to bottom of the form: (field, value)
    ("seq", "4096"), ("micro-batch", "2"), ("dp", "4"), ("zero", "1"),
    ("recompute", "full"), ("precision", "fp32"), ("gpu", "h200"),
    ("efficiency", "0.4"), ("overlap", "0.5"),
]  # fmt: skip


def summary_line(r: dict) -> str:
    """The summary the page heads its results with, in Python's formatting."""
    fits = "fits" if r["fits"] else "does not fit"
    return (
        f"{r['memory_bytes']['total'] / 1e9:,.2f} GB a GPU, {fits}; "
        f"{r['tokens_per_s']:,.0f} tokens/s; MFU {r['mfu']:.1%}"
    )


def type_into(page, name: str, value: str) -> None:
    """As a reader does: focus the field (the page scrolls to it), then type."""
    field = f"figure.cp-sizing [name={name}]"
    page.focus(field)
    assert page.evaluate(IN_VIEW, [f"[name={name}]"]) == [True], name  # not covered
    if page.evaluate(f"document.querySelector('{field}').tagName") == "SELECT":
        page.select_option(field, value)
    else:
        page.keyboard.press("Control+A")
        page.keyboard.type(value)


@pytest.mark.parametrize("width", [1280, 390])
def test_the_results_stay_in_view_while_a_field_changes(
    open_page,
    served,
    built_site,
    width: int,
) -> None:
    """Side by side at 1280×900 (the figures in view); on a phone the summary, stuck
    under the header. Each change is the CLI's answer, seen as it is typed."""
    page = open_page(width=width)
    page.goto(sizing_url(served, built_site) + "#calculator")
    page.wait_for_function("() => window.cpSizing && window.cpSizing.last().result")
    tops = []
    for name, value in CHANGES:
        type_into(page, name, value)
        shown = page.evaluate("() => cpSizing.last()")
        found, line = cli(shown["argv"])
        at = shown["argv"].index(f"--{name}")
        assert line is None and shown["argv"][at + 1] == value, shown
        assert_close(shown["result"], found, name)
        parts = [".cp-sizing__summary"]
        if width == 1280:  # beside the form: the figures themselves
            parts += ["dd[data-key=fits]", "dd[data-key=mfu]", ".cp-sizing__bar"]
        assert all(page.evaluate(IN_VIEW, parts)), (width, name)
        assert page.inner_text(".cp-sizing__summary") == summary_line(found), name
        tops.append(page.evaluate("scrollY"))
    assert tops[-1] - tops[0] > 500  # the form did scroll by: the test means it
    assert not page.foreign and not page.errors, (page.foreign, page.errors)


FIGURES = ("tokens", "mfu", "step", "fits", "memory", "time", "held")


def test_a_refused_field_is_marked_and_nothing_is_recomputed(
    open_page,
    served,
    built_site,
) -> None:
    argv = "--preset llama3-8b --dp 8 --zero 3".split()
    page = open_page(width=1280)
    page.goto(sizing_url(served, built_site) + query(argv) + "#calculator")
    page.wait_for_function("() => window.cpSizing && window.cpSizing.last().result")
    before = page.evaluate(READ_PAGE)
    assert not before["stale"] and before["error"] is None

    type_into(page, "tp", "3")  # 32 heads do not split 3 ways
    now = page.evaluate("() => cpSizing.last()")
    assert now["result"] is None
    assert (
        now["error"]
        == cli(now["argv"])[1]
        == ("error: --heads 32 is not divisible by --tp 3")
    )
    assert field_state(page, "tp") == (True, "heads 32 is not divisible by tp 3")
    assert field_state(page, "heads") == (False, None)  # the preset's, not given
    stale = page.evaluate(READ_PAGE)
    assert stale["stale"] and stale["error"] == (
        "Not recomputed. tp: heads 32 is not divisible by tp 3. The figures below "
        "are stale: they are the last valid configuration's."
    )
    assert {k: stale[k] for k in FIGURES} == {k: before[k] for k in FIGURES}
    dimmed = "getComputedStyle(document.querySelector('.cp-sizing__results')).opacity"
    assert float(page.evaluate(dimmed)) < 0.5
    assert page.inner_text(".cp-sizing__summary") == (
        "Not recomputed: fix tp; the figures are stale"
    )

    type_into(page, "zero", "1")  # a valid change while tp is refused: still nothing
    now = page.evaluate("() => cpSizing.last()")
    assert now["result"] is None and "--zero" in now["argv"]
    assert now["argv"][now["argv"].index("--zero") + 1] == "1"
    again = page.evaluate(READ_PAGE)
    assert {k: again[k] for k in FIGURES} == {k: before[k] for k in FIGURES}

    type_into(page, "tp", "2x")  # a number box would read this as empty: tp 1
    line = cli(page.evaluate("() => cpSizing.last()")["argv"])[1]
    assert (
        line == "error: argument --tp: expected a whole number, got '2x' (see --help)"
    )
    assert field_state(page, "tp") == (True, "expected a whole number, got '2x'")
    assert "(see --help)" not in page.inner_text("figure.cp-sizing")
    assert page.evaluate(READ_PAGE)["stale"]

    page.click(".cp-sizing__error a")  # the line above the results leads to the field
    assert page.evaluate("document.activeElement.name") == "tp"

    type_into(page, "tp", "2")  # fixed: computed from what the form now says
    now = page.evaluate("() => cpSizing.last()")
    assert now["argv"] == argv[:4] + ["--tp", "2", "--zero", "1"]
    found = cli(now["argv"])[0]
    assert_close(now["result"], found, "fixed")
    fixed = page.evaluate(READ_PAGE)
    assert not fixed["stale"] and fixed["error"] is None
    assert fixed["mfu"] == pytest.approx(found["mfu"], rel=1e-9) != before["mfu"]
    assert field_state(page, "tp") == (False, None)
    assert page.locator("[aria-invalid]").count() == 0
    assert not page.foreign and not page.errors, (page.foreign, page.errors)


def test_an_absurd_input_says_why_and_zero3_says_what_a_gpu_holds(
    open_page,
    served,
    built_site,
) -> None:
    page = open_page(width=390)
    page.goto(sizing_url(served, built_site) + "#calculator")
    page.wait_for_function("() => window.cpSizing && window.cpSizing.last().result")
    for argv, key in (
        ("--preset llama3-8b --micro-batch 100000", "memory_bytes"),
        ("--preset gpt2-124m --dp 1000000", "mfu"),
    ):
        page.evaluate("a => cpSizing.apply(a)", argv.split())
        found = cli(argv.split())[0]
        why = page.locator(f".cp-sizing__why[data-warning={key}]")
        assert why.is_visible() and why.inner_text() == found["warnings"][key], argv
        assert page.evaluate(READ_PAGE)["why"] == found["warnings"]
    assert page.inner_text("dd[data-key=mfu]").startswith("0.0% (0.0%)")

    argv = "--preset llama3-8b --dp 1000000000".split()  # refused: beyond 2^20 GPUs
    page.evaluate("a => cpSizing.apply(a)", argv)
    line = cli(argv)[1]
    assert line.startswith("error: --dp is above 1,048,576 GPUs")
    assert field_state(page, "dp") == (True, line.removeprefix("error: --"))

    argv = "--preset llama3-8b --dp 4 --zero 3".split()
    page.evaluate("a => cpSizing.apply(a)", argv)
    found = cli(argv)[0]
    assert page.inner_text("dd[data-key=params]") == "8.03 B in all"
    held = found["params_held_per_gpu"]  # a quarter of 8,030,261,248
    assert held == 8_030_261_248 / 4
    assert page.inner_text("dd[data-key=params_held_per_gpu]") == (
        f"{held / 1e9:.4g} B under ZeRO-3 (of 8.03 B)"
    )
    # semantic markup: the note's section is an h2, the widget's titles h3, and
    # every table header says what it heads
    assert page.evaluate(
        "[...document.querySelectorAll('figure.cp-sizing :is(h1,h2,h3,h4,h5,h6)')]"
        ".map(h => h.tagName)"
    ) == ["H3", "H3"]
    assert all(page.locator("figure.cp-sizing th").all_inner_texts())
    assert not page.foreign and not page.errors, (page.foreign, page.errors)


FIELD = """name => {
  const input = document.querySelector(`figure.cp-sizing [name="${name}"]`);
  const id = input.getAttribute('aria-describedby');
  const said = id && document.getElementById(id);
  return [input.getAttribute('aria-invalid') === 'true',
          said && said.closest('.cp-sizing__field') === input.closest(
            '.cp-sizing__field') && said.checkVisibility() ? said.textContent : null];
}"""


def field_state(page, name: str) -> tuple[bool, str | None]:
    """Is the field marked invalid, and the message beside it (if it is there)."""
    return tuple(page.evaluate(FIELD, name))


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
          all('dd, legend, .cp-sizing__legend li, input, select, td, ' +
              '.cp-sizing__summary, .cp-sizing__why', 'color'),
          all('input, select', 'backgroundColor'),
          all('.cp-sizing__error, .cp-sizing__message, .cp-sizing__summary, ' +
              '.cp-sizing__field--invalid label', 'color')];
}"""


def check_colours(page, material: str) -> None:
    """Material's scheme is on; an error, the text and the fields hold 4.5:1, the
    bars 3:1, and the fields take the page's background (no white box on slate)."""
    page.evaluate("() => cpSizing.apply(['--preset', 'gpt2-124m', '--tp', '5'])")
    bg, seen, _, _, _, errors = page.evaluate(COLOURS)
    assert seen == material and len(errors) == 4  # the line, message, summary, label
    assert all(contrast(c, bg) >= 4.5 for c in errors), (errors, bg)
    page.evaluate("() => cpSizing.apply(['--preset', 'gpt2-124m', '--zero', '3'])")
    bg, _, parts, texts, fields, _ = page.evaluate(COLOURS)
    low = [f"part {c}" for c in set(parts) if contrast(c, bg) < 3]
    low += [f"text {c}" for c in set(texts) if contrast(c, bg) < 4.5]
    low += [f"field {c}" for c in set(fields) if contrast(c, bg) > 1.5]
    assert parts and texts and fields and not low, (bg, low)
