"""The search index carries math as plain text, not TeX.

lunr indexes a page's source, and a reader searches for what the page shows:
``\\frac{a}{b}`` becomes ``(a)/(b)``, ``\\alpha`` becomes α, ``(p-1) n`` stays. Notebook
pages write their math between dollars.
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
