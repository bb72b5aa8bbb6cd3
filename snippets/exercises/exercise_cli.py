"""``python -m snippets exercise``: list, start, check, solution.

    python -m snippets exercise list
    python -m snippets exercise start NAME [--dir DIR] [--force]
    python -m snippets exercise check NAME FILE [-n N] [--timeout S]
    python -m snippets exercise solution NAME

``check`` exits 0 when every case passes, 1 when one fails, 2 on bad input (an unknown
exercise, a missing file, a syntax error, a file without the function or with the
wrong signature, ``-n 0``). Passes are kept in a progress file: ``COMMONPLACE_PROGRESS``
if set, else ``.commonplace-progress.json`` in the folder the command runs in;
``list`` reads it. Nothing a reader wrote is ever overwritten: ``start`` refuses an
existing file without ``--force``, and a progress file that cannot be read is left as
it is.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import re
from pathlib import Path

from snippets.core.cli import OneLineParser, guarded, positive_float, positive_int
from snippets.core.errors import UsageError
from snippets.core.import_graph import REPO_DIR
from snippets.exercises import engine
from snippets.exercises.catalog import exercise, exercises, note_facts

PROGRESS_VARIABLE = "COMMONPLACE_PROGRESS"
PROGRESS_FILE = ".commonplace-progress.json"
SECTION = re.compile(r"^\s*# --8<-- \[(start|end):(\w+)\]\s*$")


def progress_path() -> Path:
    return Path(os.environ.get(PROGRESS_VARIABLE) or PROGRESS_FILE)


def read_progress() -> dict:
    path = progress_path()
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(
            f"{path}: cannot read the progress file ({type(exc).__name__}); "
            f"move it away or set {PROGRESS_VARIABLE} to another path"
        ) from None
    if not isinstance(data, dict):
        raise UsageError(f"{path}: the progress file is not a JSON object")
    return data


def record(name: str, file: str, passed: bool) -> None:
    """Keep this attempt (and the first pass) in the progress file, atomically."""
    path = progress_path()
    progress = read_progress()
    now = datetime.datetime.now().isoformat(timespec="seconds")
    digest = hashlib.sha256(Path(file).read_bytes()).hexdigest()[:12]
    entry = progress.get(name, {})
    entry |= {"last": now, "last_passed": passed, "file": str(file), "sha256": digest}
    if passed:
        entry.setdefault("passed", now)
    progress[name] = entry
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(progress, indent=1, sort_keys=True) + "\n", "utf-8")
    os.replace(tmp, path)


def cmd_list(opts) -> int:
    progress = read_progress()
    rows = []
    for ex in exercises():
        facts = note_facts(ex.note)
        done = progress.get(ex.name, {})
        state = "passed" if "passed" in done else ("tried" if done else "-")
        ranks = "1" if not ex.distributed else "/".join(map(str, ex.world_sizes))
        rows.append((ex.name, state, ranks, f"{facts['series']} {facts['part']}"))
    header = ("exercise", "you", "ranks", "note (series, part)")
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(3)]
    for row in [header] + rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + row[3])
    passed = sum(1 for ex in exercises() if "passed" in progress.get(ex.name, {}))
    print(f"\n{passed} of {len(rows)} passed (progress: {progress_path()})")
    return 0


def command_for(name: str, file: str) -> str:
    return f"python -m snippets exercise check {name} {file}"


def cmd_start(opts) -> int:
    ex = exercise(opts.name)
    folder = Path(opts.dir)
    target = folder / f"{ex.name}.py"
    if target.exists() and not opts.force:
        raise UsageError(f"{target} exists: it is kept; --force replaces it")
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"{folder} is not a folder")
    folder.mkdir(parents=True, exist_ok=True)
    target.write_text(engine.stub(ex, command_for(ex.name, str(target))), "utf-8")
    print(f"wrote {target}: write {ex.function.__name__}, then")
    print(f"  {command_for(ex.name, str(target))}")
    return 0


def cmd_check(opts) -> int:
    ex = exercise(opts.name)
    sizes = ex.world_sizes
    if opts.nproc is not None:
        if not ex.distributed and opts.nproc != 1:
            raise UsageError(f"{ex.name} runs in one process: -n must be 1")
        sizes = (opts.nproc,)
    passed = True
    for n in sizes:
        outcome = engine.check(ex, opts.file, n, opts.timeout)
        print("\n".join(engine.report(ex, outcome)))
        passed = passed and outcome.passed
        if not outcome.passed:
            break
    record(ex.name, opts.file, passed)
    if passed:
        print(f"passed: {ex.title}. The project's own: exercise solution {ex.name}")
    else:
        print("not yet: fix the first failure above and check again")
    return 0 if passed else 1


def solution_text(ex: engine.Exercise) -> str:
    """The section of the project's module the note shows, markers left out."""
    file, section = ex.solution.rsplit(":", 1)
    lines, inside = [], False
    for line in (REPO_DIR / file).read_text(encoding="utf-8").splitlines():
        marker = SECTION.match(line)
        if marker and marker.group(2) == section:
            inside = marker.group(1) == "start"
            continue
        if inside and not SECTION.match(line):
            lines.append(line)
    return "\n".join(lines).strip("\n") + "\n"


def cmd_solution(opts) -> int:
    ex = exercise(opts.name)
    facts = note_facts(ex.note)
    print(f'# {ex.solution}, as the note "{facts["title"]}" shows it\n')
    print(solution_text(ex), end="")
    return 0


def build_parser() -> OneLineParser:
    parser = OneLineParser(
        prog="python -m snippets exercise",
        description="Write a concept yourself; the project's oracles grade it.",
    )
    sub = parser.add_subparsers(
        dest="command", required=True, parser_class=OneLineParser
    )
    p = sub.add_parser("list", help="every exercise, its note, and whether you passed")
    p.set_defaults(fn=cmd_list)
    p = sub.add_parser("start", help="write NAME.py: the contract, hints, no answer")
    p.add_argument("name")
    p.add_argument("--dir", default="exercises", help="where to write (exercises/)")
    p.add_argument("--force", action="store_true", help="replace an existing file")
    p.set_defaults(fn=cmd_start)
    p = sub.add_parser("check", help="grade FILE with the project's own checks")
    p.add_argument("name")
    p.add_argument("file")
    p.add_argument(
        "-n",
        dest="nproc",
        type=positive_int,
        help="ranks (default: each size the exercise names)",
    )
    p.add_argument(
        "--timeout",
        type=positive_float,
        default=engine.DEFAULT_TIMEOUT_S,
        metavar="S",
        help="a wait longer than this is a deadlock (default 20 s); a one-process "
        "exercise gets 6 times this for all its cases",
    )
    p.set_defaults(fn=cmd_check)
    p = sub.add_parser("solution", help="print the project's solution, as the note")
    p.add_argument("name")
    p.set_defaults(fn=cmd_solution)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        opts = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage line (2), already printed
        return int(exc.code or 0)
    return guarded(lambda: opts.fn(opts))
