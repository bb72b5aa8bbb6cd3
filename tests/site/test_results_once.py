"""One copy of each result: a note that shows a run as its printed output
(``results/NAME.md``) and as a table or figure (``results/NAME.<part>.md``) must not
show the same numbers in both.

Two rules, on the text each include really puts on the page (expanded by
pymdownx.snippets itself, so a line range ``results/NAME.md:1:3,-4:-4`` counts only
the lines it selects: here the first two lines of output and the closing fence):

* a table repeated: at least half of a table's rows (and two or more) are lines of
  the printed output, i.e. every number of the one is on the other (three numbers,
  or one that is not a whole number below 10);
* an output repeated: 80% or more of the output's numbers (integers below 10 are
  counts, ranks and steps, common to any two views of a run, so they do not count;
  at least five left) are in the run's other tables on the same page (a chart's
  data table holds hundreds of numbers, some equal to any output's by chance; the
  first rule still holds charts' rows to the output's lines).

Two numbers are the same when they agree to the precision of the shorter one (the
output prints ``0.579``, the table ``0.5792``); a whole number matches only itself.
"""

from __future__ import annotations

import re
from pathlib import Path

import markdown
import pytest
from conftest import REPO

INCLUDE = re.compile(
    r'^[ \t]*--8<-- "results/(?P<run>\w+)(?P<part>\.\w+)?\.md(?P<lines>:[-0-9:,]*)?"',
    re.M,
)
NUMBER = re.compile(r"(?<![\w.])(\d+)(?:\.(\d+))?(?:[eE]([-+]?\d+))?(?![\w.]*\d)")
PAGES = sorted((REPO / "docs").rglob("*.md"))

Number = tuple[float, float]  # (value, step of its last printed digit)


def numbers(text: str) -> list[Number]:
    text = re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", text)  # 28,032 is 28032
    found = []
    for m in NUMBER.finditer(text):
        exponent, decimals = int(m.group(3) or 0), len(m.group(2) or "")
        found.append((float(m.group(0)), 10.0 ** (exponent - decimals)))
    return found


def same(a: Number, b: Number) -> bool:
    """Equal to the shorter one's precision; a whole number only to a whole number
    (11 sizes is not the 10.92 ms of a table)."""
    if max(a[1], b[1]) >= 1:
        return a[0] == b[0]
    return abs(a[0] - b[0]) <= 0.5 * max(a[1], b[1]) * (1 + 1e-9)


def measured(n: Number) -> bool:
    """Not a whole number below 10 (a count, a rank, a step, a version)."""
    return n[0] >= 10 or n[0] != int(n[0])


def among(few: list[Number], many: list[Number]) -> bool:
    """Every number of ``few`` matches its own number of ``many``."""
    left = list(many)
    for n in few:
        i = next((i for i, m in enumerate(left) if same(n, m)), None)
        if i is None:
            return False
        left.pop(i)
    return True


def one_line(row: list[Number], line: list[Number]) -> bool:
    """A row and a line say the same: the numbers of one are all on the other, and
    there are three of them or one is measured (two small integers say nothing)."""
    few, many = sorted([row, line], key=len)
    return (len(few) >= 3 or any(map(measured, few))) and among(few, many)


def shown_lines(text: str) -> list[list[Number]]:
    """The numbers of each line a reader sees: no provenance, no chart spec, no code
    block title, a figure's data table one row a line."""
    text = re.sub(r'<p class="cp-provenance">.*?</p>', "", text, flags=re.S)
    text = re.sub(r"<script\b.*?</script>", "", text, flags=re.S)
    text = re.sub(r'title="[^"]*"', "", text)
    text = re.sub(r"<[^>]+>", " ", text.replace("</tr>", "\n"))
    return [numbers(line) for line in text.splitlines()]


def expand(include: str, base: Path) -> str:
    """What pymdownx.snippets puts on the page for one include line."""
    md = markdown.Markdown(
        extensions=["pymdownx.snippets"],
        extension_configs={
            "pymdownx.snippets": {"base_path": [str(base)], "check_paths": True}
        },
    )
    return "\n".join(md.preprocessors["snippet"].run([include.strip()]))


def repeated(page: str, base: Path) -> list[str]:
    """Each way ``page`` shows a result twice, in words."""
    runs: dict[str, dict[str, str]] = {}
    for m in INCLUDE.finditer(page):
        runs.setdefault(m["run"], {})[m["part"] or ""] = expand(m.group(0), base)
    problems = []
    for run, parts in runs.items():
        if "" not in parts or len(parts) < 2:
            continue
        printed = shown_lines(parts.pop(""))
        dump = [ns for ns in printed if len(ns) >= 2]
        elsewhere: list[Number] = []
        for part, text in parts.items():
            rows = [ns for ns in shown_lines(text) if len(ns) >= 2]
            if "cp-chart__spec" not in text:  # a chart's data: too many to coincide
                elsewhere += [n for row in rows for n in row]
            twice = [r for r in rows if any(one_line(r, d) for d in dump)]
            if len(twice) >= 2 and 2 * len(twice) >= len(rows):
                problems.append(
                    f"{run}{part}: {len(twice)} of its {len(rows)} rows are also"
                    f" lines of results/{run}.md"
                )
        mine = [n for line in printed for n in line if measured(n)]
        again = [n for n in mine if any(same(n, m) for m in elsewhere)]
        if len(mine) >= 5 and 5 * len(again) >= 4 * len(mine):
            problems.append(
                f"results/{run}.md: {len(again)} of its {len(mine)} numbers are"
                f" in the {', '.join(run + p for p in parts)} include(s) too"
            )
    return problems


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_a_page_shows_each_result_once(page: Path, results_dir: Path) -> None:
    problems = repeated(page.read_text(encoding="utf-8"), results_dir.parent)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_a_partial_output_is_one_whole_code_block_under_the_run_s_provenance(
    page: Path, results_dir: Path
) -> None:
    """A line range of ``results/NAME.md`` keeps the fence that opens the block (with
    its command) and the one that closes it; it leaves out the provenance line, which
    another include of the same run on the page carries (one line, not two)."""
    text = page.read_text(encoding="utf-8")
    shown = {
        m["run"] + (m["part"] or ""): expand(m.group(0), results_dir.parent)
        for m in INCLUDE.finditer(text)
        if m["part"]
    }
    for m in INCLUDE.finditer(text):
        if m["part"] or not m["lines"]:
            continue
        where = (page.name, m.group(0))
        lines = expand(m.group(0), results_dir.parent).strip().splitlines()
        assert lines[0].startswith('```text title="$ '), where
        assert lines[-1] == "```" and lines.count("```") == 1, where
        assert any(
            name.startswith(m["run"] + ".") and 'class="cp-provenance"' in html
            for name, html in shown.items()
        ), where


DUMP = (
    '```text title="$ python -m snippets run demo -n 2"\n{}\n```\n\n'
    '<p class="cp-provenance">Last run: here</p>\n'
)
TABLE = "| rank | a | b |\n|---|---|---|\n{}\n"
PAGE = '--8<-- "results/demo.md{}"\n\n--8<-- "results/demo.ring.md"\n'


def demo(tmp_path: Path, dump: str, rows: str) -> Path:
    (tmp_path / "results").mkdir(exist_ok=True)
    (tmp_path / "results" / "demo.md").write_text(DUMP.format(dump))
    (tmp_path / "results" / "demo.ring.md").write_text(TABLE.format(rows))
    return tmp_path


def test_a_table_printed_again_rounded_is_caught(tmp_path: Path) -> None:
    """Hand-made: the output prints the table's rows, rounded; a line range that
    keeps only its first line passes, and so does output that says something else."""
    rows = "| 2 | 0.5792 | 42% |\n| 4 | 1.737 | 59% |\n| 8 | 4.054 | 74% |"
    dump = (
        "α = 289.6 µs, β = 0.731 ns/B\n"
        "  p=2: ring latency 0.579 ms, 42% of 1 MiB\n"
        "  p=4: ring latency 1.74 ms, 59% of 1 MiB\n"
        "  p=8: ring latency 4.05 ms, 74% of 1 MiB"
    )
    base = demo(tmp_path, dump, rows)
    assert repeated(PAGE.format(""), base) == [
        "demo.ring: 3 of its 3 rows are also lines of results/demo.md"
    ]
    assert repeated(PAGE.format(":1:2,-4:-4"), base) == []
    demo(tmp_path, "α = 289.6 µs, β = 0.731 ns/B\n  p=2: 0.61 ms, 16.4 GB/s", rows)
    assert repeated(PAGE.format(""), base) == []


def test_output_that_prints_a_table_transposed_is_caught(tmp_path: Path) -> None:
    """No row of the table is a line of the output, yet every number is in both."""
    rows = "\n".join(f"| {r} | {24000 if r == 0 else 8000} | 24000 |" for r in range(4))
    dump = "root     [24000, 8000, 8000, 8000]\neveryone [24,000, 24000, 24000, 24000]"
    base = demo(tmp_path, dump, rows)
    assert repeated(PAGE.format(""), base) == [
        "results/demo.md: 8 of its 8 numbers are in the demo.ring include(s) too"
    ]
    assert repeated(PAGE.format(":1:1,-4:-4"), base) == []
