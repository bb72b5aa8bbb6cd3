"""Each prediction's answer against an independent count (a real run's messages, the
executed plan, the paper's printed figure), and a changed formula changes the page."""

from __future__ import annotations

import re

from ring_bytes_rank import bytes_sent_and_received

from snippets.core.runtime import launch
from snippets.parallel import predictions
from snippets.parallel.pipeline.pipeline_schedules import schedule
from snippets.parallel.pipeline.pipeline_validate import simulate
from snippets.render import render
from snippets.sizing.cost_formulas import Cost


def answers() -> dict:
    return {p.id: p.answer() for p in predictions.PREDICTIONS}


def test_the_byte_answers_are_what_rank_0_really_moves_on_4_ranks() -> None:
    counts = launch(bytes_sent_and_received, 4, "gloo", 60.0)
    rank0 = next(c for c in counts if c["rank"] == 0)
    assert answers()["ring_bytes"] == rank0["ring_sent"]
    assert answers()["naive_root_bytes"] == sum(c["naive_to_root"] for c in counts)


def test_the_bubble_answer_is_the_executed_plans_idle_share() -> None:
    played = simulate(schedule("1f1b", 4, 8))
    assert abs(answers()["one_f_one_b_bubble"] - played.bubble) < 1e-12


def test_the_zero_answer_is_the_papers_printed_figure() -> None:
    # Rajbhandari et al. (2020), Figure 1: 7.5B parameters, 64 GPUs, stage 3: 1.9 GB
    assert round(answers()["zero3_bytes"] / 1e9, 1) == 1.9


def test_the_page_shows_what_the_formula_gives_and_follows_it(monkeypatch) -> None:
    shown = render(predictions.main()["parts"]["ring_bytes"])
    assert "1,572,864 bytes" in shown and 'data-answer="1572864.0"' in shown
    monkeypatch.setattr(predictions, "ring_cost", lambda p: Cost(0, 1.0, 0))
    changed = render(predictions.main()["parts"]["ring_bytes"])
    assert "1,048,576 bytes" in changed and "1,572,864" not in changed


def test_every_widget_is_a_labelled_form_with_its_answer_folded_away() -> None:
    for p in predictions.PREDICTIONS:
        form = render(predictions.question(p, p.answer()))
        field = re.search(r'<input id="([\w-]+)"', form).group(1)
        assert f'<label for="{field}">' in form
        assert "<details" in form and "<summary>" in form
        assert form.index("<details") < form.index(f"{p.unit}</strong>")
