"""hooks/notebook.py: the notebook page's provenance, from the run that made it."""

from __future__ import annotations

import datetime
import re

from conftest import REPO, load_hook

notebook = load_hook("notebook")


def test_a_notebook_page_without_its_own_record_says_so() -> None:
    wrapper = '<main><div class="jupyter-wrapper"><p>out</p></div></main>'
    said = notebook.notebook_provenance(wrapper)
    assert said.count("cp-provenance") == 1 and "not recorded" in said
    stamped = wrapper.replace("<p>out", '<p class="cp-provenance">Last run: x</p><p>')
    assert notebook.notebook_provenance(stamped) == stamped


def test_the_notebook_records_the_commit_and_time_it_ran() -> None:
    """Executed as mkdocs-jupyter executes it: the line it prints names this checkout's
    commit and a time between the start and the end of the run (the clock is the
    oracle), so a page made from the cache shows that run's, not the build's."""
    from mkdocs_jupyter import convert

    from snippets.core.results import commit

    def now() -> datetime.datetime:
        return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)

    start = now()
    html = convert.nb2html(
        str(REPO / "docs" / "notebooks" / "tiling-step-by-step.ipynb"),
        execute=True,
        allow_errors=False,
    )
    end = now()
    lines = re.findall(r'<p class="cp-provenance">(.*?)</p>', html)
    assert len(lines) == 1, lines
    when = re.search(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) UTC", lines[0])
    ran = datetime.datetime.fromisoformat(when.group(1) + "+00:00")
    assert start <= ran <= end, (start, ran, end)
    assert f"commit {commit()} ·" in lines[0]
    wrapped = f'<div class="jupyter-wrapper">{html}</div>'
    assert notebook.notebook_provenance(wrapped) == wrapped
