"""The notebook page (mkdocs-jupyter), made like the others.

* Its template's MathJax loader and its cdnjs mermaid import go: nothing is fetched
  from another host, and its ``$…$`` math is typeset by the site's KaTeX
  (``hooks/page_assets.py`` gives a notebook page with math the KaTeX files).
* Its styles are JupyterLab's (about 570 kB inline): only the rules that name classes
  the page uses stay, with only the custom properties they read. The stray ``<style>``
  that holds a Python list's repr (mkdocs-jupyter appends ``str()`` of its list of
  Pygments stylesheets, already inlined above it) goes. Output breaks lines between
  words, never inside a number (JupyterLab's ``word-break: break-all``).
* Its provenance line is the notebook's own output, written by the run that made the
  page (a page served from mkdocs-jupyter's cache shows the earlier run's commit and
  time); a page whose outputs carry none says so.
"""

from __future__ import annotations

import re

import tinycss2  # nbconvert's own dependency (bleach[css]): there wherever it is
from page_assets import KINDS

NOTEBOOK = "jupyter-wrapper"


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


STYLE = re.compile(r"(<style\b[^>]*>)(.*?)(</style>)", re.S)
CLASS_ATTR = re.compile(r'\bclass="([^"]*)"')
VAR = re.compile(r"var\(\s*(--[\w-]+)")


def _selectors(prelude: str) -> list[str]:
    """A selector list split at its top-level commas."""
    out, depth, start = [], 0, 0
    for i, c in enumerate(prelude):
        depth += (c in "([") - (c in ")]")
        if c == "," and depth == 0:
            out.append(prelude[start:i].strip())
            start = i + 1
    return [*out, prelude[start:].strip()]


def _applies(selector: str, classes: set[str]) -> bool:
    """Whether every class the selector requires is on the page (what ``:not()``
    names is not required)."""
    required = re.sub(r":not\((?:[^()]|\([^()]*\))*\)", "", selector)
    return set(re.findall(r"\.(-?[A-Za-z_][\w-]*)", required)) <= classes


def _prune_rules(rules, classes: set[str]) -> list:
    """(selector or at-rule prelude, declarations or nested rules) for each rule that
    applies to the page; @charset, @font-face and empty blocks go."""
    kept = []
    for rule in rules:
        if rule.type == "qualified-rule":
            prelude = tinycss2.serialize(rule.prelude).strip()
            selectors = [s for s in _selectors(prelude) if _applies(s, classes)]
            declarations = [
                d
                for d in tinycss2.parse_blocks_contents(rule.content, True, True)
                if d.type == "declaration"
            ]
            if selectors and declarations:
                kept.append((",".join(selectors), declarations))
        elif rule.type == "at-rule" and rule.content is not None:
            head = f"@{rule.at_keyword}{tinycss2.serialize(rule.prelude)}"
            if rule.lower_at_keyword in ("media", "supports"):
                inner = tinycss2.parse_rule_list(rule.content, True, True)
                nested = _prune_rules(inner, classes)
                if nested:
                    kept.append((head, nested))
            elif rule.lower_at_keyword.endswith("keyframes"):
                kept.append((head, tinycss2.serialize(rule.content)))
    return kept


def _declaration(d) -> str:
    value = tinycss2.serialize(d.value).strip()
    if d.lower_name == "word-break" and value == "break-all":
        value = "normal"  # wrap between words (word-wrap still breaks a long one)
    return f"{d.name}:{value}{'!important' if d.important else ''}"


def _serialize(kept, wanted: set[str]) -> str:
    out = []
    for head, body in kept:
        if isinstance(body, str):  # keyframes, as they were
            out.append(f"{head}{{{body}}}")
        elif body and isinstance(body[0], tuple):  # @media and the like
            out.append(f"{head}{{{_serialize(body, wanted)}}}")
        else:
            text = ";".join(
                _declaration(d)
                for d in body
                if not d.name.startswith("--") or d.name in wanted
            )
            if text:
                out.append(f"{head}{{{text}}}")
    return "".join(out)


def _declarations(kept):
    for _, body in kept:
        if isinstance(body, list) and body and isinstance(body[0], tuple):
            yield from _declarations(body)
        elif isinstance(body, list):
            yield from body


def slim_styles(output: str) -> str:
    """The page's own ``<style>`` blocks cut to what its elements use: rules whose
    classes the page holds, custom properties something reads. The block holding a
    Python list's repr goes."""
    classes = {c for m in CLASS_ATTR.finditer(output) for c in m.group(1).split()}
    blocks = [
        (m, _prune_rules(tinycss2.parse_stylesheet(m.group(2), True, True), classes))
        for m in STYLE.finditer(output)
        if not m.group(2).lstrip().startswith("[")
    ]
    # custom properties: those the page or a kept declaration reads, and what they read
    values = {}
    wanted = set(VAR.findall(STYLE.sub("", output)))
    for _, kept in blocks:
        for d in _declarations(kept):
            value = tinycss2.serialize(d.value)
            if d.name.startswith("--"):
                values.setdefault(d.name, []).append(value)
            else:
                wanted |= set(VAR.findall(value))
    todo = list(wanted)
    while todo:
        for value in values.get(todo.pop(), []):
            new = set(VAR.findall(value)) - wanted
            wanted |= new
            todo += new
    slim = {m.start(): _serialize(kept, wanted) for m, kept in blocks}

    def block(m: re.Match) -> str:
        if m.start() not in slim:
            return ""  # the list repr
        css = slim[m.start()]
        return f"{m.group(1)}{css}{m.group(3)}" if css else ""

    return STYLE.sub(block, output)


PROVENANCE = KINDS["provenance"]  # the marker snippets/render writes a run's line with
NOT_RECORDED = (
    f"{PROVENANCE.marker}>When and where this notebook ran is not recorded in its"
    f" outputs.</{PROVENANCE.tag}>"
)


def notebook_provenance(output: str) -> str:
    """The notebook page with its run's own provenance line (an output of its setup
    cells), or with a line that says it has none."""
    if PROVENANCE.marker in output:
        return output
    wrapper = '<div class="jupyter-wrapper">'
    return output.replace(wrapper, NOT_RECORDED + wrapper, 1)


def on_post_page(output, page, config):
    if NOTEBOOK in output:
        output = notebook_provenance(slim_styles(strip_notebook_scripts(output)))
    return output
