// Scrollable tables (Material wraps each in .md-typeset__scrollwrap) and display math
// can be focused from the keyboard, and then scrolled with the arrow keys.
document$.subscribe(({ body }) => {
  for (const el of body.querySelectorAll(".md-typeset__scrollwrap, div.arithmatex")) {
    el.tabIndex = 0;
  }
});
