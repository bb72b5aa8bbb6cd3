"""The renderer: a snippet's result (data) into the files the notes include.

Imported by the runner (``run-all``), the CLI and the hooks, never by a snippet: a
snippet returns tables, chart specs and parts (``snippets.core.parts``); this package
alone writes HTML, each kind with the marker and assets of the one table,
``snippets/render/kinds.py``. One floor above ``core``, beside ``sizing``
(floors: ``tests/core/test_floors.py``).
"""

from snippets.render.fragments import render
from snippets.render.write import write

__all__ = ["render", "write"]
