"""The site's machinery, on the top floor: the registry (every snippet and bench by
name, each module imported for its SPEC), ``run-all`` (every snippet in the order its
results are needed, each written through ``snippets.render``), the order it runs in,
and the one-GPU check with its report. It imports ``core`` and ``render`` and runs the
snippets as processes; no folder imports it (floors: ``tests/core/test_floors.py``).
"""
