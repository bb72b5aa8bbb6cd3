"""The search index carries math as plain text, not TeX, code by its names, and no
run's printout.

lunr indexes a page's source, and a reader searches for what the page shows:
``\\frac{a}{b}`` becomes ``(a)/(b)``, ``\\alpha`` becomes α, ``(p-1) n`` stays. Notebook
pages write their math between dollars. A run's output block (titled with its
command, ``$ python -m snippets run …``) keeps its command in the index and drops its
printout: numbers that change with every run, which a reader does not search for. A
code block keeps the names it defines (its ``def`` and ``class`` lines), so a search
for ``ring_allreduce`` still finds the note that shows it; its bodies stay out. Every
page loads the index, so what it holds is what every reader downloads.
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


CODE = re.compile(r"<pre><code>(.*?)</code></pre>", re.S)
DEFINES = re.compile(r"^\s*(?:async\s+)?(?:def|class)\s+\w+", re.M)


def without_run_output(text: str) -> str:
    """Drop a run's printout; shrink each code block to the names it defines."""
    text = RUN_OUTPUT.sub(r"\1", text)
    return CODE.sub(lambda m: " ".join(DEFINES.findall(m.group(1))), text)


def on_post_build(config):
    index = Path(config.site_dir) / "search" / "search_index.json"
    if not index.is_file():
        return
    data = json.loads(index.read_text(encoding="utf-8"))
    for doc in data["docs"]:
        dollars = doc["location"].startswith("notebooks/")
        doc["text"] = plain_math(without_run_output(doc["text"]), dollars)
        doc["title"] = plain_math(doc["title"], dollars)
    index.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
