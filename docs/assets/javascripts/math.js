// Typeset the \( … \) and \[ … \] spans that pymdownx.arithmatex leaves, and the
// $ … $ / $$ … $$ of notebook Markdown cells, with the KaTeX copy this site serves
// itself. hooks/pages.py adds this script only to pages that have math.
document$.subscribe(({ body }) => {
  const tex = [
    { left: "\\(", right: "\\)", display: false },
    { left: "\\[", right: "\\]", display: true },
  ];
  renderMathInElement(body, { delimiters: tex, throwOnError: false });
  const dollars = [{ left: "$$", right: "$$", display: true },
                   { left: "$", right: "$", display: false }, ...tex];
  for (const cell of body.querySelectorAll(".jupyter-wrapper .jp-RenderedMarkdown")) {
    renderMathInElement(cell, { delimiters: dollars, throwOnError: false });
  }
});
