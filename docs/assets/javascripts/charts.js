// Draws every <figure class="cp-chart"> from the Vega-Lite spec inlined in it, with the
// vega-embed this site serves itself. The spec holds the light scheme; when Material's
// scheme is slate, the spec's usermeta.dark is merged over its config, and the charts
// are drawn again whenever the reader toggles the scheme. No action menu: nothing here
// links to or loads from another host. A legend that fades series on a click (Vega's
// SVG takes no focus) gets a row of buttons under the chart that do the same from the
// keyboard: one shows only its series, pressed again shows all.

function merged(config, over) {
  const out = Object.assign({}, config);
  for (const [key, value] of Object.entries(over || {})) {
    out[key] = Object.assign({}, config[key], value);
  }
  return out;
}

function isDark() {
  return document.body.getAttribute("data-md-color-scheme") === "slate";
}

const views = [];

function keys(figure, view) {
  const signals = view.getState({ signals: (name) => /_legend$/.test(name) }).signals;
  const [signal, more] = Object.keys(signals || {});
  if (!signal || more) return;
  const row = document.createElement("div");
  row.className = "cp-chart__keys";
  row.setAttribute("role", "group");
  row.setAttribute("aria-label", "Show only one series");
  const buttons = view
    .scale("color")
    .domain()
    .map((value) => {
      const b = row.appendChild(document.createElement("button"));
      Object.assign(b, { type: "button", textContent: String(value) });
      b.addEventListener("click", () => {
        view.signal(signal, view.signal(signal) === value ? null : value).runAsync();
      });
      return [b, value];
    });
  const show = (picked) => {
    for (const [b, value] of buttons) b.ariaPressed = String(value === picked);
  };
  view.addSignalListener(signal, (_, picked) => show(picked)); // the legend's clicks
  show(view.signal(signal));
  figure.querySelector(".cp-chart__view").after(row);
}

function draw() {
  while (views.length) views.pop().finalize();
  for (const row of document.querySelectorAll(".cp-chart__keys")) row.remove();
  const dark = isDark();
  for (const figure of document.querySelectorAll("figure.cp-chart")) {
    const spec = JSON.parse(figure.querySelector(".cp-chart__spec").textContent);
    const meta = spec.usermeta || {};
    if (dark) spec.config = merged(spec.config, meta.dark);
    vegaEmbed(figure.querySelector(".cp-chart__view"), spec, {
      renderer: "svg",
      actions: false,
      tooltip: { theme: dark ? "dark" : "light" },
    })
      .then((result) => {
        views.push(result);
        keys(figure, result.view);
      })
      .catch((error) => console.error("chart:", error));
  }
}

draw();
new MutationObserver(draw).observe(document.body, {
  attributes: true,
  attributeFilter: ["data-md-color-scheme"],
});
