"""What each page loads and links, decided from what it holds.

* KaTeX (its CSS, scripts and ``math.js``) only on pages with math, mermaid only on
  pages with a diagram: the other pages skip about 5 MB.
* The notebook page (mkdocs-jupyter): its template's MathJax and cdnjs mermaid
  imports go; its ``$…$`` math is typeset by the same KaTeX (``math.js`` looks in
  notebook Markdown cells). Its provenance line is the notebook's own output, written
  by the run that made the page (a page served from mkdocs-jupyter's cache shows the
  earlier run's commit and time); a page whose outputs carry none says so.
* ``repo_url``: REPO_URL, else the checkout's ``origin`` remote as a web address
  (GitHub or GitLab, ssh or https), else none, and then no links at all rather than
  wrong ones. Provenance lines link their commit, and ``snippets/…`` code titles their
  file at ``code_ref()`` (REPO_REF, GITHUB_SHA, GITHUB_REF_NAME, else the built
  commit), so a link shows the code that was built.
* The search index carries math as plain text (``(p-1) n``), not TeX.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

from mkdocs.utils import get_relative_url

log = logging.getLogger("mkdocs.hooks.pages")

KATEX_CSS = "assets/vendor/katex/katex.min.css"
KATEX_JS = [
    "assets/vendor/katex/katex.min.js",
    "assets/vendor/katex/contrib/auto-render.min.js",
    "assets/javascripts/math.js",
]
MERMAID_JS = "assets/vendor/mermaid/mermaid.min.js"
NOTEBOOK = "jupyter-wrapper"


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


def has_math(output: str) -> bool:
    return 'class="arithmatex"' in output or (
        NOTEBOOK in output and re.search(r"\$[^$\s][^$]*\$", output) is not None
    )


def strip_notebook_scripts(output: str) -> str:
    """The nbconvert template's MathJax loader and config, and its module script
    that imports mermaid from cdnjs when a notebook has a diagram."""
    output = re.sub(
        r"<!-- Load mathjax -->.*?<!-- End of mathjax configuration -->",
        "",
        output,
        flags=re.S,
    )
    return re.sub(
        r'<script type="module">(?:(?!</script>).)*cdnjs\.cloudflare\.com.*?</script>',
        "",
        output,
        flags=re.S,
    )


NOT_RECORDED = (
    '<p class="cp-provenance">When and where this notebook ran is not recorded in its'
    " outputs.</p>"
)


def notebook_provenance(output: str) -> str:
    """The notebook page with its run's own provenance line (an output of its setup
    cells), or with a line that says it has none."""
    if 'class="cp-provenance"' in output:
        return output
    wrapper = '<div class="jupyter-wrapper">'
    return output.replace(wrapper, NOT_RECORDED + wrapper, 1)


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

    output = re.sub(
        r'(<p class="cp-provenance">[^<]*?commit )([0-9a-f]{7,40})([^<]*</p>)',
        commit,
        output,
    )
    return re.sub(r'<span class="filename">(snippets/[\w/]+\.py)</span>', code, output)


def on_post_page(output, page, config):
    if NOTEBOOK in output:
        output = notebook_provenance(strip_notebook_scripts(output))
    if config.repo_url:
        output = linkify(output, config.repo_url, _ref[0])
    head, tail = [], []
    if has_math(output):
        css = get_relative_url(KATEX_CSS, page.url)
        head.append(f'<link rel="stylesheet" href="{css}">')
        tail += KATEX_JS
    if 'class="mermaid"' in output:
        # before Material's bundle, which fetches mermaid itself if it is not defined
        src = get_relative_url(MERMAID_JS, page.url)
        output = re.sub(
            r'(<script src="[^"]*assets/javascripts/bundle\.[^"]*"></script>)',
            lambda m: f'<script src="{src}"></script>' + m.group(1),
            output,
            count=1,
        )
    if head:
        output = output.replace("</head>", "".join(head) + "</head>", 1)
    tags = "".join(
        f'<script src="{get_relative_url(s, page.url)}"></script>' for s in tail
    )
    before, end, after = output.rpartition("</body>")
    return before + tags + end + after if end else output + tags


SYMBOLS = {
    "alpha": "α", "beta": "β", "gamma": "γ", "delta": "δ", "epsilon": "ε",
    "lambda": "λ", "mu": "μ", "sigma": "σ", "tau": "τ", "theta": "θ", "pi": "π",
    "Delta": "Δ", "Sigma": "Σ", "sum": "Σ", "prod": "Π", "infty": "∞",
    "cdot": "·", "times": "×", "div": "÷", "le": "≤", "leq": "≤", "ge": "≥",
    "geq": "≥", "ne": "≠", "neq": "≠", "approx": "≈", "to": "→", "rightarrow": "→",
    "leftarrow": "←", "gets": "←", "ldots": "…", "dots": "…", "cdots": "⋯",
    "lceil": "⌈", "rceil": "⌉", "lfloor": "⌊", "rfloor": "⌋", "in": "∈",
    "pm": "±", "sqrt": "√", "log": "log", "exp": "exp", "max": "max", "min": "min",
}  # fmt: skip


def tex_to_text(tex: str) -> str:
    """TeX as a reader would say it in plain text: ``\\frac{a}{b}`` is ``a/b``,
    ``\\alpha`` is α, spacing commands are spaces, braces go."""
    text = re.sub(r"\\frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}", r"(\1)/(\2)", tex)
    text = re.sub(r"\\(?:text|mathrm|mathbf|mathit|operatorname)\s*\{([^{}]*)\}",
                  r"\1", text)  # fmt: skip
    text = re.sub(r"\\[,;:! ]|~", " ", text)
    text = re.sub(r"\\(?:left|right|big|Big|bigg|Bigg)\b", "", text)
    text = re.sub(r"\\([A-Za-z]+)", lambda m: SYMBOLS.get(m.group(1), m.group(1)), text)
    text = text.replace("\\{", "{").replace("\\}", "}").replace("\\", "")
    text = text.replace("{", "").replace("}", "")
    return re.sub(r"\s+", " ", text).strip()


MATH = re.compile(r"\\\((.+?)\\\)|\\\[(.+?)\\\]", re.S)
DOLLARS = re.compile(r"\$\$(.+?)\$\$|\$([^$\s][^$]*?)\$", re.S)  # notebooks only


def plain_math(text: str, dollars: bool = False) -> str:
    def say(m: re.Match) -> str:
        return tex_to_text(next(g for g in m.groups() if g))

    text = MATH.sub(say, text)
    return DOLLARS.sub(say, text) if dollars else text


def on_post_build(config):
    index = Path(config.site_dir) / "search" / "search_index.json"
    if not index.is_file():
        return
    data = json.loads(index.read_text(encoding="utf-8"))
    for doc in data["docs"]:
        dollars = doc["location"].startswith("notebooks/")
        doc["text"] = plain_math(doc["text"], dollars)
        doc["title"] = plain_math(doc["title"], dollars)
    index.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
