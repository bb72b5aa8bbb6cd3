"""Exercises: write a concept yourself, and be graded by the project's own oracles.

``python -m snippets exercise list | start NAME | check NAME FILE | solution NAME``
(:mod:`snippets.exercises.exercise_cli`). The grader (:mod:`.engine`, a file a job)
runs a reader's function on real ranks over gloo and compares it with the same oracle
the project's own implementation is tested against. The checks live in ``checks/``, a
file a topic, code only; every word an exercise says lives in ``exercises.md``, and
:mod:`.catalog` joins the two. The floor under ``tools``: it may import every other
folder of snippets (floors: ``tests/core/test_floors.py``).
"""
