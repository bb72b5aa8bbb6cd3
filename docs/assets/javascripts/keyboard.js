// Scrollable tables (Material wraps each in .md-typeset__scrollwrap) and display math
// can be focused from the keyboard, and then scrolled with the arrow keys. The bar
// that holds a code block's copy button is a <nav> Material adds without a name, many
// alike on a page: it is no navigation landmark, so it is marked as none.
document$.subscribe(({ body }) => {
  for (const el of body.querySelectorAll(".md-typeset__scrollwrap, div.arithmatex")) {
    el.tabIndex = 0;
  }
  for (const nav of body.querySelectorAll("nav.md-code__nav")) {
    nav.setAttribute("role", "none");
  }
});
