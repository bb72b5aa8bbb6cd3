"""Every exercise, graded on the project's own solution: the proof that the grader and
the code the notes show agree, and the pages a reader starts from.

``main`` checks each exercise's solution (the module the note shows) through the same
grader a reader's file meets, at the exercise's first world size, and fails if one
does not pass. It then writes what the site shows:

* ``results/exercise_pages.try-<name>.md``: the note's closing "Try it yourself": the
  commands, the contract (the stub's signature and docstring), the hints, and how the
  project's own solution did in this run;
* ``results/exercise_pages.series-<slug>.md``: one table per series, in reading order,
  for the Exercises pages.

    python -m snippets run exercise_pages
"""

from __future__ import annotations

import re

from snippets.core.claims import LawBroken
from snippets.core.import_graph import REPO_DIR
from snippets.core.runtime import Spec, print0
from snippets.exercises import engine
from snippets.exercises.catalog import SERIES, exercises, note_facts

SPEC = Spec(
    summary="grades the project's own solution of every exercise", timeout_s=900.0
)


def series_slug(series: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", series.lower()).strip("-")


def contract_text(ex: engine.Exercise) -> str:
    """What the reader's file starts with, without the module docstring."""
    text = engine.stub(ex, "")
    body = text[text.index("def ") :].splitlines()
    return "\n".join(line for line in body if "# hint:" not in line) + "\n"


def try_it(ex: engine.Exercise, record: dict) -> str:
    start = f"N={ex.name}\npython -m snippets exercise start $N"
    check = "python -m snippets exercise check $N exercises/$N.py"
    where = (
        f"on {' and '.join(map(str, ex.world_sizes))} ranks over gloo"
        if ex.distributed
        else "in one process"
    )
    refused = (
        " Built-in collectives are refused: build it from send and recv."
        if ex.point_to_point
        else ""
    )
    hints = "".join(f"- {h}\n" for h in ex.hints)
    return (
        f"### Exercise: {ex.title}\n\n"
        f"Write it yourself. The grader runs your file {where} with the checks the "
        f"code above passes.{refused}\n\n"
        f'```bash title="start, then check"\n{start}\n{check}\n```\n\n'
        f'```python title="exercises/{ex.name}.py: the contract"\n'
        f"{contract_text(ex)}```\n\n"
        f"Hints:\n\n{hints}\n"
        f"The answer is the code shown above (`python -m snippets exercise "
        f"solution {ex.name}`); in the last run it passed all {record['cases']} "
        f"cases on {record['world_size']} "
        f"{'ranks' if ex.distributed else 'process'}.\n"
    )


def series_table(series: str, rows: list[dict]) -> str:
    lines = [
        "| # | exercise | note | ranks | start |",
        "|---|---|---|---|---|",
    ]
    for i, row in enumerate(rows, 1):
        lines.append(
            f"| {i} | {row['title']} | [{row['note_title']}]"
            f"(../blog/posts/{row['note']}.md#exercise-{row['anchor']}) | "
            f"{row['ranks']} | `python -m snippets exercise start {row['name']}` |"
        )
    return "\n".join(lines) + "\n"


def main() -> dict:
    records, markdown = [], {}
    for ex in exercises():
        solution = str(REPO_DIR / ex.solution.split(":")[0])
        n = ex.world_sizes[0]
        outcome = engine.check(ex, solution, n)
        if not outcome.passed:
            failed = next(c for c in outcome.cases if c["failure"] is not None)
            raise LawBroken(f"{ex.name}: the project's own solution failed {failed}")
        facts = note_facts(ex.note)
        record = {
            "name": ex.name,
            "title": ex.title,
            "note": ex.note,
            "note_title": facts["title"],
            "series": facts["series"],
            "part": facts["part"],
            "anchor": re.sub(r"[^a-z0-9]+", "-", ex.title.lower()).strip("-"),
            "ranks": "/".join(map(str, ex.world_sizes)) if ex.distributed else "1",
            "world_size": n,
            "cases": len(outcome.cases),
        }
        records.append(record)
        markdown[f"try-{ex.name}"] = try_it(ex, record)
        print0(f"{ex.name}: the project's solution passed {record['cases']} cases")
    for series in SERIES:
        rows = [r for r in records if r["series"] == series]
        if rows:
            markdown[f"series-{series_slug(series)}"] = series_table(series, rows)
    return {"exercises": records, "markdown": markdown}


if __name__ == "__main__":
    from snippets.core.cli import main_entry

    raise SystemExit(main_entry(main, SPEC))
