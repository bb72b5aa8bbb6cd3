"""hooks/repo_links.py: the repository's address from the checkout, and code links at
the built ref."""

from __future__ import annotations

import subprocess

import pytest
from conftest import REPO, load_hook

links = load_hook("repo_links")


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
    assert links.web_url(remote) == url


def test_repo_url_prefers_the_environment_then_the_checkout() -> None:
    origin = "git@github.com:octo/notes.git"
    assert links.repo_url({}, origin) == "https://github.com/octo/notes"
    assert links.repo_url({}, None) is None
    env = {"REPO_URL": "git@gitlab.com:team/notes.git"}
    assert links.repo_url(env, origin) == "https://gitlab.com/team/notes"
    env = {"REPO_URL": "https://bot:pw@code.example.net:8443/notes/"}
    assert links.repo_url(env, None) == "https://code.example.net:8443/notes"
    assert links.repo_url({"REPO_URL": "/srv/git/notes"}, origin) is None


def test_code_links_use_the_ref_from_the_environment_else_the_built_commit() -> None:
    head = "0123456789abcdef0123456789abcdef01234567"
    assert links.code_ref({}, head) == head
    assert links.code_ref({"GITHUB_REF_NAME": "main"}, head) == "main"
    env = {"GITHUB_REF_NAME": "main", "GITHUB_SHA": "feedbeef"}
    assert links.code_ref(env, head) == "feedbeef"
    assert links.code_ref({**env, "REPO_REF": "v1.2"}, head) == "v1.2"
    assert links.code_ref({}, None) == "HEAD"


def test_linkify_points_commits_and_files_at_the_forge_s_own_pages() -> None:
    html = (
        '<p class="cp-provenance">Last run: cpu · commit 70ca07d1a133+changes · '
        'today</p><span class="filename">snippets/comm/ring.py</span>'
    )
    hub = links.linkify(html, "https://github.com/o/n/", "abc123")
    assert 'href="https://github.com/o/n/commit/70ca07d1a133">70ca07d1a133</a>' in hub
    assert 'href="https://github.com/o/n/blob/abc123/snippets/comm/ring.py"' in hub
    lab = links.linkify(html, "https://gitlab.com/g/n", "abc123")
    assert 'href="https://gitlab.com/g/n/-/commit/70ca07d1a133"' in lab
    assert 'href="https://gitlab.com/g/n/-/blob/abc123/snippets/comm/ring.py"' in lab


def test_this_checkout_gives_the_address_its_remote_names() -> None:
    """The oracle is git itself: whatever origin says (or nothing)."""
    origin = subprocess.run(
        ["git", "remote", "get-url", "origin"], cwd=REPO, capture_output=True, text=True
    )
    found = links.repo_url({}, links.git("remote", "get-url", "origin", cwd=REPO))
    if origin.returncode != 0:
        assert found is None
    else:
        assert found == links.web_url(origin.stdout)
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True
    ).stdout.strip()
    assert links.code_ref({}, links.git("rev-parse", "HEAD", cwd=REPO)) == head
