"""Exercises: write a concept yourself, and be graded by the project's own oracles.

``python -m snippets exercise list | start NAME | check NAME FILE | solution NAME``
(:mod:`snippets.exercises.exercise_cli`). The grader (:mod:`grader`) runs a reader's
function on real ranks over gloo and compares it with the same oracle the project's
own implementation is tested against; each series' exercises live in one file here.
The top floor: it may import every other folder (floors: ``tests/core/test_floors.py``).
"""
