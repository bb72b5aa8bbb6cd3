"""The notebook page (mkdocs-jupyter), made like the others.

* Its template's MathJax loader and its cdnjs mermaid import go: nothing is fetched
  from another host, and its ``$…$`` math is typeset by the site's KaTeX
  (``hooks/page_assets.py`` gives a notebook page with math the KaTeX files).
* Its provenance line is the notebook's own output, written by the run that made the
  page (a page served from mkdocs-jupyter's cache shows the earlier run's commit and
  time); a page whose outputs carry none says so.
"""

from __future__ import annotations

import re

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


def on_post_page(output, page, config):
    if NOTEBOOK in output:
        output = notebook_provenance(strip_notebook_scripts(output))
    return output
