"""The grader's engine: a reader's function, run on real ranks, held to the project's
oracles. One file a job:

* :mod:`.exercise`: what an exercise is (the code that grades it, the words it says);
* :mod:`.calls`: the ``torch.distributed`` calls the reader's code makes, watched on
  every rank (kind, peer, bytes), a built-in collective refused where the exercise
  builds it from point-to-point, and the bytes alive at once;
* :mod:`.cases`: the cases a check runs (``grade.case``, ``case.call``,
  ``case.equal``) and what each rank keeps of them in its state file;
* :mod:`.reader_file`: the reader's file, loaded and held to the contract's
  signature, and its own lines in a traceback;
* :mod:`.on_ranks`: a check launched on the ranks (or in this process) and their
  reports merged into one :class:`Outcome`;
* :mod:`.verdict`: what the reader reads: the stub they start from, the verdict.

The checks themselves live in ``snippets/exercises/checks/``, a file a topic.
"""

from snippets.exercises.engine.calls import Call, LiveBytes, Watcher
from snippets.exercises.engine.cases import Case, Grade
from snippets.exercises.engine.exercise import Exercise
from snippets.exercises.engine.on_ranks import DEFAULT_TIMEOUT_S, Outcome, check
from snippets.exercises.engine.reader_file import ImportFailed, load
from snippets.exercises.engine.verdict import report, stub

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "Call",
    "Case",
    "Exercise",
    "Grade",
    "ImportFailed",
    "LiveBytes",
    "Outcome",
    "Watcher",
    "check",
    "load",
    "report",
    "stub",
]
