"""hooks/pages.py: the repository's address from the checkout, code links at the built
ref, and the notebook page's provenance written by the run that made it."""

from __future__ import annotations

import datetime
import importlib.util
import re
import subprocess

import pytest
from conftest import REPO

spec = importlib.util.spec_from_file_location("pages_hook", REPO / "hooks" / "pages.py")
pages = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pages)


@pytest.mark.parametrize(
    "remote, url",
    [
        ("git@github.com:octo/notes.git", "https://github.com/octo/notes"),
        ("ssh://git@github.com/octo/notes.git", "https://github.com/octo/notes"),
        ("ssh://git@gitlab.com:2222/g/sub/notes", "https://gitlab.com/g/sub/notes"),
        ("https://github.com/octo/notes.git", "https://github.com/octo/notes"),
        ("https://bot:s3cr3t@github.com/octo/notes", "https://github.com/octo/notes"),
        ("https://GitLab.example.org/t/notes/", "https://gitlab.example.org/t/notes"),
        ("git://github.com/octo/notes.git", "https://github.com/octo/notes"),
        ("/srv/git/notes.git", None),
        ("file:///srv/git/notes.git", None),
        ("git@example.org:octo/notes.git", None),
        ("https://github.com/octo", None),
        ("", None),
        (None, None),
    ],
)  # fmt: skip
def test_a_remote_becomes_its_web_address_or_nothing(remote, url) -> None:
    assert pages.web_url(remote) == url


def test_repo_url_prefers_the_environment_then_the_checkout() -> None:
    origin = "git@github.com:octo/notes.git"
    assert pages.repo_url({}, origin) == "https://github.com/octo/notes"
    assert pages.repo_url({}, None) is None
    env = {"REPO_URL": "git@gitlab.com:team/notes.git"}
    assert pages.repo_url(env, origin) == "https://gitlab.com/team/notes"
    env = {"REPO_URL": "https://bot:pw@code.example.net:8443/notes/"}
    assert pages.repo_url(env, None) == "https://code.example.net:8443/notes"
    assert pages.repo_url({"REPO_URL": "/srv/git/notes"}, origin) is None


def test_code_links_use_the_ref_from_the_environment_else_the_built_commit() -> None:
    head = "0123456789abcdef0123456789abcdef01234567"
    assert pages.code_ref({}, head) == head
    assert pages.code_ref({"GITHUB_REF_NAME": "main"}, head) == "main"
    env = {"GITHUB_REF_NAME": "main", "GITHUB_SHA": "feedbeef"}
    assert pages.code_ref(env, head) == "feedbeef"
    assert pages.code_ref({**env, "REPO_REF": "v1.2"}, head) == "v1.2"
    assert pages.code_ref({}, None) == "HEAD"


def test_linkify_points_commits_and_files_at_the_forge_s_own_pages() -> None:
    html = (
        '<p class="cp-provenance">Last run: cpu · commit 70ca07d1a133+changes · '
        'today</p><span class="filename">snippets/comm/ring.py</span>'
    )
    hub = pages.linkify(html, "https://github.com/o/n/", "abc123")
    assert 'href="https://github.com/o/n/commit/70ca07d1a133">70ca07d1a133</a>' in hub
    assert 'href="https://github.com/o/n/blob/abc123/snippets/comm/ring.py"' in hub
    lab = pages.linkify(html, "https://gitlab.com/g/n", "abc123")
    assert 'href="https://gitlab.com/g/n/-/commit/70ca07d1a133"' in lab
    assert 'href="https://gitlab.com/g/n/-/blob/abc123/snippets/comm/ring.py"' in lab


def test_this_checkout_gives_the_address_its_remote_names() -> None:
    """The oracle is git itself: whatever origin says (or nothing)."""
    origin = subprocess.run(
        ["git", "remote", "get-url", "origin"], cwd=REPO, capture_output=True, text=True
    )
    found = pages.repo_url({}, pages.git("remote", "get-url", "origin", cwd=REPO))
    if origin.returncode != 0:
        assert found is None
    else:
        assert found == pages.web_url(origin.stdout)
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True
    ).stdout.strip()
    assert pages.code_ref({}, pages.git("rev-parse", "HEAD", cwd=REPO)) == head


def test_a_notebook_page_without_its_own_record_says_so() -> None:
    wrapper = '<main><div class="jupyter-wrapper"><p>out</p></div></main>'
    said = pages.notebook_provenance(wrapper)
    assert said.count("cp-provenance") == 1 and "not recorded" in said
    stamped = wrapper.replace("<p>out", '<p class="cp-provenance">Last run: x</p><p>')
    assert pages.notebook_provenance(stamped) == stamped


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
    assert pages.notebook_provenance(wrapped) == wrapped
