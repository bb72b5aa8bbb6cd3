"""The checks, a file a topic: the code that grades each exercise, and nothing else.

Each ``*_checks`` module lists its exercises' code half in ``CHECKS`` (the project's
function, the check, the world sizes); their words are in ``../exercises.md``. A check
file imports the engine and the project's own modules, never another check file.
"""
