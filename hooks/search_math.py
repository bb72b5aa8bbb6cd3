"""The search index carries math as plain text, not TeX, code by its names, and no
run's printout.

lunr indexes a page's source, and a reader searches for what the page shows:
``\\frac{a}{b}`` becomes ``(a)/(b)``, ``\\alpha`` becomes α, ``(p-1) n`` stays. Notebook
pages write their math between dollars. A run's output block (titled with its
command, ``$ python -m snippets run …``) keeps its command in the index and drops its
printout: numbers that change with every run, which a reader does not search for. A
code block keeps the names it defines (its ``def`` and ``class`` lines) and the
commands it runs (``python …``, ``make …``), as a line of text, so a search for
``ring_allreduce`` still finds the note that shows it; its bodies stay out, and no
preview is ever a code block (a notebook's code cells stay out whole, source and
printout). Every page loads the index, so what it holds is what every reader
downloads.

A preview is a document's first text, so none is left empty: a section with no text
of its own (a heading whose content is all in its subsections) leaves the index; a
page with none gets its front matter's ``description``, or, for a list of notes, their
titles; and the tags page is one document, its first paragraph and then every tag,
not a section a tag, which would leave the page's own result a bare title above them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

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


RUN_OUTPUT = re.compile(
    r"(\$ (?:python|torchrun)[^<]*)<pre><code>.*?</code></pre>", re.S
)  # a run's output block: its title (the command), then the printout


CODE = re.compile(r"<pre>(?:<code>)?(.*?)(?:</code>)?</pre>", re.S)
DEFINES = re.compile(r"^\s*(?:async\s+)?(?:def|class)\s+\w+", re.M)
COMMANDS = re.compile(
    r"^\s*(?:\$\s+)?((?:python|torchrun|make|git|pip|npm)\b[^#\n]*?)\s*(?:#.*)?$", re.M
)
# a notebook's code cell in the index: its prompt, its source twice (a <pre> for the
# copy button, then the highlighted copy as bare text) and its printout, up to the
# next Markdown cell's first block or the next cell
NOTEBOOK_CELL = re.compile(
    r"(?:In|Out)\xa0\[\d*\]:.*?(?=<p>|<ul>|<ol>|(?:In|Out)\xa0\[|$)", re.S
)


def code_words(code: str) -> str:
    """A code block as the line a reader would search it by: the names it defines
    and the commands it runs; nothing when it has neither."""
    words = DEFINES.findall(code) + COMMANDS.findall(code)
    return f"<p>{' '.join(w.strip() for w in words)}</p>" if words else ""


def without_run_output(text: str) -> str:
    """Drop a run's printout; shrink each code block to its names and commands."""
    text = RUN_OUTPUT.sub(r"\1", text)
    return CODE.sub(lambda m: code_words(m.group(1)), text)


TAGS_PAGE = "tags/"


def one_tags_document(docs: list[dict]) -> list[dict]:
    """The tags page as one document: its first paragraph, then every tag."""
    tags = [d["title"] for d in docs if d["location"].startswith(TAGS_PAGE + "#")]
    kept = [d for d in docs if not d["location"].startswith(TAGS_PAGE + "#")]
    for doc in kept:
        if doc["location"] == TAGS_PAGE and tags:
            doc["text"] = f"{doc['text']} <p>{', '.join(tags)}</p>".strip()
    return kept


_descriptions: dict[str, str] = {}  # page URL -> its front matter's description


def on_page_context(context, page, config, nav):
    description = page.meta.get("description")
    posts = getattr(page, "posts", None)  # a blog view: the series, archive, index
    if isinstance(description, str) and description.strip():
        _descriptions[page.url] = description.strip()
    elif posts:
        _descriptions[page.url] = "; ".join(post.title for post in posts)
    return context


def with_previews(docs: list[dict]) -> list[dict]:
    """No empty preview: a page's empty text is its description; an empty section
    leaves (its subsections hold its content)."""
    kept = []
    for doc in one_tags_document(docs):
        if not doc["text"].strip():
            if "#" in doc["location"]:
                continue
            doc["text"] = _descriptions.get(doc["location"], "")
        kept.append(doc)
    return kept


def on_post_build(config):
    index = Path(config.site_dir) / "search" / "search_index.json"
    if not index.is_file():
        return
    data = json.loads(index.read_text(encoding="utf-8"))
    for doc in data["docs"]:
        dollars = doc["location"].startswith("notebooks/")
        if dollars:
            doc["text"] = NOTEBOOK_CELL.sub(" ", doc["text"])
        doc["text"] = plain_math(without_run_output(doc["text"]), dollars)
        doc["title"] = plain_math(doc["title"], dollars)
    data["docs"] = with_previews(data["docs"])
    index.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
