// Typeset the \( … \) and \[ … \] spans that pymdownx.arithmatex leaves, with the KaTeX
// copy this site serves itself. Runs on every page Material shows.
document$.subscribe(({ body }) => {
  renderMathInElement(body, {
    delimiters: [
      { left: "\\(", right: "\\)", display: false },
      { left: "\\[", right: "\\]", display: true },
    ],
    throwOnError: false,
  });
});
