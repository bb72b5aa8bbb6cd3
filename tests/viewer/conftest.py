"""One export of the tiny GPT for every viewer test (an export costs seconds)."""

from __future__ import annotations

import pytest

from snippets.viewer.graph_export import export_graph
from snippets.viewer.model_viewer import tiny_gpt, tiny_gpt_inputs
from snippets.viewer.parallel_overlay import annotate


@pytest.fixture(scope="session")
def tiny():
    """(model, example args, annotated graph) of the shared tiny GPT."""
    model, args = tiny_gpt(), tiny_gpt_inputs()
    return model, args, annotate(export_graph(model, args))
