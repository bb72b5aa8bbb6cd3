"""What each page loads and links, decided from what it holds.

* KaTeX (its CSS, scripts and ``math.js``) only on pages with math, mermaid only on
  pages with a diagram: the other pages skip about 5 MB.
* The notebook page (mkdocs-jupyter): its template's MathJax and cdnjs mermaid
  imports go; its ``$…$`` math is typeset by the same KaTeX (``math.js`` looks in
  notebook Markdown cells); it gets a provenance line like every result.
* Provenance lines link their commit, and ``snippets/…`` code titles their file, to
  the repository (``repo_url``).
* The search index carries math as plain text (``(p-1) n``), not TeX.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from mkdocs.utils import get_relative_url

KATEX_CSS = "assets/vendor/katex/katex.min.css"
KATEX_JS = [
    "assets/vendor/katex/katex.min.js",
    "assets/vendor/katex/contrib/auto-render.min.js",
    "assets/javascripts/math.js",
]
MERMAID_JS = "assets/vendor/mermaid/mermaid.min.js"
NOTEBOOK = "jupyter-wrapper"


def on_config(config):
    """``repo_url``: REPO_URL if set, else the repository a GitHub Actions job runs
    in, else mkdocs.yml's default."""
    server, repo = (
        os.environ.get("GITHUB_SERVER_URL"),
        os.environ.get("GITHUB_REPOSITORY"),
    )
    if not os.environ.get("REPO_URL") and server and repo:
        config.repo_url = f"{server}/{repo}"
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


def notebook_provenance() -> str:
    from snippets.core.results import provenance, provenance_line
    from snippets.core.runtime import describe_device

    line = provenance_line(provenance(describe_device("none"), "no process group", 1))
    return line.replace("Last run:", "Ran when the site was built:", 1)


def linkify(output: str, repo_url: str) -> str:
    repo = repo_url.rstrip("/")

    def commit(m: re.Match) -> str:
        sha = m.group(2)
        return f'{m.group(1)}<a href="{repo}/commit/{sha}">{sha}</a>{m.group(3)}'

    output = re.sub(
        r'(<p class="cp-provenance">[^<]*?commit )([0-9a-f]{7,40})([^<]*</p>)',
        commit,
        output,
    )
    return re.sub(
        r'<span class="filename">(snippets/[\w/]+\.py)</span>',
        rf'<span class="filename"><a href="{repo}/blob/main/\1">\1</a></span>',
        output,
    )


def on_post_page(output, page, config):
    if NOTEBOOK in output:
        output = strip_notebook_scripts(output)
        output = output.replace(
            '<div class="jupyter-wrapper">',
            notebook_provenance() + '<div class="jupyter-wrapper">',
            1,
        )
    if config.repo_url:
        output = linkify(output, config.repo_url)
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
