// Draws every <figure class="cp-chart"> from the Vega-Lite spec inlined in it, with the
// vega-embed this site serves itself. The spec holds the light scheme; when Material's
// scheme is slate, the spec's usermeta.dark is merged over its config, and the charts
// are drawn again whenever the reader toggles the scheme. No action menu: nothing here
// links to or loads from another host.
(function () {
  "use strict";

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

  function draw() {
    while (views.length) views.pop().finalize();
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
        .then((result) => views.push(result))
        .catch((error) => console.error("chart:", error));
    }
  }

  draw();
  new MutationObserver(draw).observe(document.body, {
    attributes: true,
    attributeFilter: ["data-md-color-scheme"],
  });
})();
