"""Each kind of part as the fragment its script reads: the kind's marker from
``snippets/render/kinds.py``, the data inline as JSON in a ``<script
type="application/json">`` (works from file:// too), a caption or a fallback for a
page without scripts. Each is one HTML block: no blank line, which would end the block
in Markdown."""

from __future__ import annotations

import csv
import html
import io
import json
import re
from typing import Any, Callable

from snippets.render.kinds import KINDS
from snippets.render.viewer_page import summary


def inline_json(value: Any, *, compact: bool = True) -> str:
    """JSON that is safe inside a <script>: ``</`` would end the element early, and
    JSON allows the escaped ``<\\/``."""
    seps = (",", ":") if compact else None
    text = json.dumps(value, ensure_ascii=False, separators=seps)
    return text.replace("</", "<\\/")


def data_script(kind: str, role: str, value: Any, *, compact: bool = True) -> str:
    css = f"{KINDS[kind].css}__{role}"
    return (
        f'<script type="application/json" class="{css}">'
        f"{inline_json(value, compact=compact)}</script>\n"
    )


def read_back(text: str, kind: str, role: str) -> Any:
    """The JSON a page holding a ``kind`` fragment gives its script for ``role``
    (``trace``, ``graph``, ``data``, ``spec``); ValueError if it holds none."""
    css = re.escape(f"{KINDS[kind].css}__{role}")
    found = re.search(rf'<script type="application/json" class="{css}">(.*?)</', text)
    if found is None:
        raise ValueError(f"no {KINDS[kind].css}__{role} script in the text")
    return json.loads(found.group(1).replace("<\\/", "</"))


def player(trace: dict) -> str:
    """The player (``docs/assets/player/player.js``) and its trace."""
    return (
        f"{KINDS['player'].marker}>\n"
        + data_script("player", "trace", trace)
        + f"<figcaption>{html.escape(trace['title'])}</figcaption>\n"
        "</figure>\n"
    )


def viewer(data: dict) -> str:
    """The model viewer (``docs/assets/viewer/viewer.js``): the graph, the degrees the
    overlay opens with."""
    graph, start = data["graph"], data.get("start")
    return (
        f"{KINDS['viewer'].marker}>\n"
        + data_script("viewer", "graph", graph)
        + (data_script("viewer", "start", start) if start else "")
        + f"<figcaption>{html.escape(summary(graph))}</figcaption>\n"
        "</figure>\n"
    )


def sizing(config: dict) -> str:
    """The calculator's figure (``docs/assets/sizing/widget.js`` fills it)."""
    note = "The calculator needs JavaScript; the CLI gives the same numbers."
    return (
        f'{KINDS["sizing"].marker} id="calculator">\n'
        + data_script("sizing", "data", config, compact=False)
        + f"<noscript><p>{html.escape(note)}</p></noscript>\n"
        "</figure>\n"
    )


def predict(q: dict) -> str:
    """A prediction question (``docs/assets/predict/predict.js`` reveals the answer
    and says how close the guess was; without scripts it sits in a ``<details>``)."""
    field, answer, unit = f"cp-predict-{q['id']}", q["answer"], q["unit"]
    shown = f"{answer:,.0f}" if answer >= 100 else f"{answer:.4g}"
    return (
        f'{KINDS["predict"].marker} data-answer="{answer!r}" '
        f'aria-labelledby="{field}-q">\n'
        f'<p id="{field}-q"><strong>Predict.</strong> '
        f"{html.escape(q['question'])}</p>\n"
        f'<label for="{field}">Your answer ({html.escape(unit)})</label>\n'
        f'<input id="{field}" name="guess" type="text" inputmode="decimal" '
        f'autocomplete="off">\n'
        f'<button type="submit">Commit and reveal</button>\n'
        f'<p class="cp-predict-prompt" aria-live="polite"></p>\n'
        f'<details class="cp-predict-answer">\n<summary>Answer</summary>\n'
        f"<p><strong>{shown} {html.escape(unit)}</strong>. {html.escape(q['why'])} "
        f"<small>Computed by {html.escape(q['source'])}.</small></p>\n"
        f'<p class="cp-predict-verdict" aria-live="polite"></p>\n'
        f"</details>\n</form>\n"
    )


def _cell_html(v: Any) -> str:
    return html.escape(f"{v:.4g}" if isinstance(v, float) else str(v))


def _csv_type(values: list[Any]) -> str | None:
    """The Vega parse type a column's values all share (None: no CSV can carry them).
    Empty strings are left out: CSV reads an empty field back as null."""
    kinds = {type(v) for v in values if v is not None}
    if kinds <= {bool}:
        return "boolean"
    if kinds <= {int, float}:
        return "number"
    if kinds <= {str} and "" not in values:
        return "string"
    return None


def as_csv(data: dict[str, Any]) -> dict[str, Any]:
    """Inline data of flat rows as Vega's CSV with a type per column: the same values
    in a third of the bytes (no key repeated on every row). Data it cannot carry as it
    is (nested values, dotted names, mixed types, a format already given) is
    returned as it came."""
    rows = data.get("values")
    if not isinstance(rows, list) or not rows or "format" in data:
        return data
    if not all(isinstance(r, dict) for r in rows):
        return data
    names = list(dict.fromkeys(k for r in rows for k in r))
    if any(set(k) & set('.[]\\"') for k in names):
        return data
    parse = {k: _csv_type([r.get(k) for r in rows]) for k in names}
    if None in parse.values():
        return data
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(names)
    for r in rows:
        writer.writerow(
            "" if r.get(k) is None else str(r[k]).lower() if isinstance(r[k], bool)
            else r[k] for k in names
        )  # fmt: skip
    return {**data, "values": out.getvalue(), "format": {"type": "csv", "parse": parse}}


def chart(spec: dict[str, Any]) -> str:
    """A chart for the page: the Vega-Lite spec inline (the page's script draws it), a
    caption, and the data as a table for readers who cannot see the chart.

    The table is ``usermeta.rows`` where the spec gives them (a chart of many spans
    tabled by what they sum to), else the chart's rows; ``usermeta.columns`` names
    its columns. The inline spec carries its rows as CSV (:func:`as_csv`)."""
    if not isinstance(spec, dict):
        raise TypeError(f"a figure is a Vega-Lite spec (dict), not {type(spec)}")
    title = spec.get("title", "")
    title = " ".join(title) if isinstance(title, list) else str(title)
    caption = html.escape(spec.get("description") or title)
    meta = spec.get("usermeta", {})
    columns = meta.get("columns", {})
    rows = meta.get("rows") or spec.get("data", {}).get("values", [])
    columns = columns or dict.fromkeys(k for row in rows for k in row)
    head = "".join(f"<th>{html.escape(t or k)}</th>" for k, t in columns.items())
    body = "".join(
        "<tr>"
        + "".join(f"<td>{_cell_html(row.get(k, ''))}</td>" for k in columns)
        + "</tr>"
        for row in rows
    )
    page = dict(spec)
    if "rows" in meta:  # the table has them; the script does not need them
        page["usermeta"] = {k: v for k, v in meta.items() if k != "rows"}
    if isinstance(spec.get("data"), dict):
        page["data"] = as_csv(spec["data"])
    return (
        f"{KINDS['chart'].marker}>\n"
        '<div class="cp-chart__view"></div>\n'
        + data_script("chart", "spec", page, compact=False)
        + f"<figcaption>{caption}</figcaption>\n"
        '<details class="cp-chart__data" data-search-exclude="chart data">'
        "<summary>The numbers</summary>\n"
        f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>\n"
        "</details>\n"
        "</figure>\n"
    )


def provenance(p: dict[str, Any]) -> str:
    """The line under every result: where and when it ran."""
    ranks = f"{p['world_size']} rank{'s' if p['world_size'] != 1 else ''}"
    text = (
        f"Last run: {p['device']} · {p['backend']} · {ranks} · torch {p['torch']} · "
        f"commit {p['commit']} · {p['utc'].replace('T', ' ').replace('Z', ' UTC')}"
    )
    return f"{KINDS['provenance'].marker}>{html.escape(text)}</p>\n"


FRAGMENTS: dict[str, Callable[[Any], str]] = {
    "player": player,
    "viewer": viewer,
    "sizing": sizing,
    "predict": predict,
    "chart": chart,
    "provenance": provenance,
}


def render(part: dict) -> str:
    """The fragment of a part (``snippets.core.parts``): ``{"kind", "data"}``."""
    kind = part.get("kind") if isinstance(part, dict) else None
    if kind not in FRAGMENTS or kind not in KINDS:
        raise ValueError(f"no renderer for a part of kind {kind!r}")
    return FRAGMENTS[kind](part["data"])
