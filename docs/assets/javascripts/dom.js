/* Two DOM builders shared by the site's own drawings (the animation player, the model
   viewer): an SVG element or an HTML element with its attributes or class, its text,
   appended to a parent. Imported by them, so loaded
   only on pages that have one. */
const SVG_NS = "http://www.w3.org/2000/svg";

function svg(tag, attrs, parent, text) {
  const e = document.createElementNS(SVG_NS, tag);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  if (parent) parent.appendChild(e);
  return e;
}

function html(tag, cls, parent, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  if (parent) parent.appendChild(e);
  return e;
}

export { html, SVG_NS, svg };
