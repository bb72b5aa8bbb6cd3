"""Links from the site to the repository, at the commit that was built.

``repo_url``: REPO_URL, else the checkout's ``origin`` remote as a web address (GitHub
or GitLab, ssh or https), else none, and then no links at all rather than wrong ones.
Provenance lines link their commit, and ``snippets/…`` code titles their file at
``code_ref()`` (REPO_REF, GITHUB_SHA, GITHUB_REF_NAME, else the built commit), so a
link shows the code that was built.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

from page_assets import KINDS

log = logging.getLogger("mkdocs.hooks.repo_links")


def git(*args: str, cwd: str | Path) -> str | None:
    try:
        proc = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    out = proc.stdout.strip()
    return out if proc.returncode == 0 and out else None


REMOTE = re.compile(
    r"^(?:(?:ssh|git|https?)://(?:[^@/]+@)?(?P<host>[^/:]+)(?::\d+)?/"
    r"|(?:[^@/]+@)?(?P<scp_host>[^/:]+):(?!//))"
    r"(?P<path>[^\s]+?)(?:\.git)?/?$"
)


def web_url(remote: str | None) -> str | None:
    """The https address of a GitHub or GitLab repository from a git remote URL
    (``git@github.com:o/n.git``, ``ssh://git@host:22/o/n``, ``https://tok@host/o/n``),
    without credentials; None for any other remote (a path, another host)."""
    m = REMOTE.match((remote or "").strip())
    if not m:
        return None
    host = (m["host"] or m["scp_host"]).lower()
    forge = host in {"github.com", "gitlab.com"} or host.startswith(
        ("github.", "gitlab.")
    )
    path = m["path"].strip("/")
    if not forge or path.count("/") < 1 or ".." in path:
        return None
    return f"https://{host}/{path}"


def repo_url(env: Mapping[str, str], origin: str | None) -> str | None:
    """REPO_URL (a remote is turned into its web address; any other http(s) address
    is kept, less credentials), else the checkout's origin, else None."""
    given = env.get("REPO_URL", "").strip()
    if not given:
        return web_url(origin)
    parts = urlsplit(given)
    if web_url(given) or parts.scheme not in {"http", "https"} or not parts.hostname:
        return web_url(given)
    port = f":{parts.port}" if parts.port else ""  # any other web host, as given
    return f"{parts.scheme}://{parts.hostname}{port}{parts.path}".rstrip("/")


def code_ref(env: Mapping[str, str], head: str | None) -> str:
    """The ref code links point at: the environment's, else the built commit."""
    for name in ("REPO_REF", "GITHUB_SHA", "GITHUB_REF_NAME"):
        if env.get(name, "").strip():
            return env[name].strip()
    return head or "HEAD"


_ref = ["HEAD"]


def on_config(config):
    root = Path(config.config_file_path).parent
    config.repo_url = repo_url(os.environ, git("remote", "get-url", "origin", cwd=root))
    _ref[0] = code_ref(os.environ, git("rev-parse", "HEAD", cwd=root))
    if not config.repo_url:
        log.info("no REPO_URL and no GitHub/GitLab origin remote: no repository links")
    return config


def links(repo: str) -> tuple[str, str]:
    """Commit and file address patterns; GitLab's pages sit under ``/-/``."""
    dash = "/-" if "gitlab" in urlsplit(repo).netloc else ""
    return f"{repo}{dash}/commit/{{sha}}", f"{repo}{dash}/blob/{{ref}}/{{path}}"


def linkify(output: str, repo_url: str, ref: str = "HEAD") -> str:
    commit_at, file_at = links(repo_url.rstrip("/"))

    def commit(m: re.Match) -> str:
        href = commit_at.format(sha=m.group(2))
        return f'{m.group(1)}<a href="{href}">{m.group(2)}</a>{m.group(3)}'

    def code(m: re.Match) -> str:
        href = file_at.format(ref=ref, path=m.group(1))
        return f'<span class="filename"><a href="{href}">{m.group(1)}</a></span>'

    line = KINDS["provenance"]  # the run's line under a result: its commit links
    output = re.sub(
        rf"({re.escape(line.marker)}>[^<]*?commit )([0-9a-f]{{7,40}})"
        rf"([^<]*</{line.tag}>)",
        commit,
        output,
    )
    return re.sub(r'<span class="filename">(snippets/[\w/]+\.py)</span>', code, output)


def on_post_page(output, page, config):
    if config.repo_url:
        output = linkify(output, config.repo_url, _ref[0])
    return output
