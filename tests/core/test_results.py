"""What run-all writes for a figure: the spec as JSON beside the data, and a Markdown
part a note can include, which carries the spec inline, a caption and the numbers."""

from __future__ import annotations

import datetime
import html.parser
import json
import platform
import subprocess
from pathlib import Path

import pytest
import torch

from snippets import render
from snippets.core import charts, results
from snippets.core.runtime import describe_device
from snippets.render import fragments
from snippets.tools.registry import REPO_DIR

PROVENANCE = {
    "device": "cpu",
    "backend": "gloo",
    "world_size": 2,
    "torch": "2.13.0",
    "python": "3.11",
    "commit": "abc",
    "utc": "2026-01-01T00:00:00Z",
}


def spec() -> dict:
    return charts.line_chart(
        {"a </script> b": [(1, 2.0), (2, 3.5)], "fit": [(1, 2.1), (2, 3.4)]},
        title="t",
        x_label="n",
        y_label="s",
        model_of={"fit": "a </script> b"},
        description="What the chart shows & why.",
    )


class Page(html.parser.HTMLParser):
    """The parts of the figure a browser sees: the script's text, cells, the caption."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.script, self.cells, self.caption, self.figures = "", [], "", 0

    def handle_starttag(self, tag, attrs):
        self.stack.append(tag)
        if tag == "figure" and ("class", "cp-chart") in attrs:
            self.figures += 1

    def handle_endtag(self, tag):
        self.stack.pop()

    def handle_data(self, data):
        where = self.stack[-1] if self.stack else ""
        if where == "script":
            self.script += data
        elif where in ("td", "th"):
            self.cells.append(data)
        elif where == "figcaption":
            self.caption += data


def write(tmp_path: Path) -> dict[str, str]:
    record = {
        "command": "python -m snippets run x",
        "output": "ok\n",
        "provenance": PROVENANCE,
        "result": {"figures": {"plot": spec()}},
    }
    render.write(tmp_path, "x", record)
    return {p.name: p.read_text(encoding="utf-8") for p in tmp_path.iterdir()}


def test_a_figure_is_stored_as_a_spec_and_a_part(tmp_path: Path) -> None:
    files = write(tmp_path)
    assert {"x.json", "x.md", "x.plot.vl.json", "x.plot.md"} <= set(files)
    assert json.loads(files["x.plot.vl.json"]) == spec()


def test_the_part_carries_the_spec_inline_without_a_blank_line(tmp_path: Path) -> None:
    part = write(tmp_path)["x.plot.md"]
    figure = part[: part.index("</figure>")]
    assert "\n\n" not in figure  # a blank line would end Markdown's HTML block
    page = Page()
    page.feed(part)
    assert page.figures == 1
    # "</script>" in a name did not cut it
    assert as_vega_reads_it(json.loads(page.script)) == spec()


READ = """import {read} from 'vega-loader';
let text = ''; process.stdin.on('data', d => text += d).on('end', () => {
  const data = JSON.parse(text);
  console.log(JSON.stringify(read(data.values, data.format)));
});"""


def as_vega_reads_it(spec: dict) -> dict:
    """The spec with its CSV rows read back by Vega's own loader (the page's)."""
    data = spec["data"]
    if "format" not in data:
        return spec
    out = subprocess.run(["node", "--input-type=module", "-e", READ], cwd=REPO_DIR,
                         input=json.dumps(data), capture_output=True, text=True,
                         check=True).stdout  # fmt: skip
    rest = {k: v for k, v in data.items() if k != "format"}
    return spec | {"data": rest | {"values": json.loads(out)}}


def test_the_inline_rows_are_csv_that_vega_reads_back_as_they_were() -> None:
    rows = [{"s": "a, \"b\"", "n": 1, "x": 0.1 + 0.2, "t": True, "v": None},
            {"s": "</script>", "n": -3, "x": 1e-300, "t": False, "v": 2.5}]  # fmt: skip
    data = fragments.as_csv({"values": rows})
    assert data["format"]["type"] == "csv" and isinstance(data["values"], str)
    assert as_vega_reads_it({"data": data})["data"]["values"] == rows
    spans = charts.picked_timeline(
        [{"lane": "r0", "kind": "F", "label": "F0", "start": i, "end": i + 0.5,
          "p": 2} for i in range(200)], settings={"p": [2]}, title="t",
        x_label="ms", kinds=["F"])  # fmt: skip
    page = Page()
    page.feed(fragments.chart(spans))
    inline = json.loads(page.script)
    assert len(page.script) < len(json.dumps(spans)) / 2  # the rows' keys said once
    assert as_vega_reads_it(inline)["data"] == spans["data"]
    # what a CSV cannot say stays JSON: an empty string (read back as null), nested
    # values, a dotted name (a path to Vega), mixed types, a format already given
    for kept in ([{"s": ""}], [{"s": {"a": 1}}], [{"a.b": 1}], [{"m": 1}, {"m": "1"}]):
        assert fragments.as_csv({"values": kept}) == {"values": kept}
    given = {"values": "a\n1", "format": {"type": "csv"}}
    assert fragments.as_csv(given) == given


def test_a_picked_timeline_tables_its_runs_not_its_spans() -> None:
    spans = [
        {"lane": f"r{r}", "kind": k, "label": k, "start": t, "end": t + d, "p": p}
        for p in (2, 3)
        for r in range(p)
        for k, t, d in (("F", 0, 1.0), ("idle", 1.0, 0.5 * r), ("B", 2.0, 2.0))
    ]
    spec = charts.picked_timeline(
        spans,
        settings={"p": [2, 3, 4]},
        title="t",
        x_label="time",
        x_unit="ms",
        kinds=["F", "B", "idle"],
        idle="idle",
        captions=[{"p": 4, "text": "no run"}],
    )
    page = Page()
    page.feed(fragments.chart(spec))
    head = ["p", "F, all lanes (ms)", "B, all lanes (ms)", "idle, all lanes (ms)",
            "last end (ms)", "note"]  # fmt: skip
    assert page.cells[:6] == head
    rows = [page.cells[i : i + 6] for i in range(6, len(page.cells), 6)]
    # p = 3: three lanes' F and B, idle 0 + 0.5 + 1.0, the last end at 4
    assert rows == [["2", "2", "4", "0.5", "4", "–"], ["3", "3", "6", "1.5", "4", "–"],
                    ["4", "–", "–", "–", "–", "no run"]]  # fmt: skip
    assert "rows" not in json.loads(page.script)["usermeta"]


def test_the_part_has_a_text_alternative_and_provenance(tmp_path: Path) -> None:
    part = write(tmp_path)["x.plot.md"]
    page = Page()
    page.feed(part)
    assert page.caption == "What the chart shows & why."
    assert page.cells[:3] == ["series", "n", "s"]
    assert page.cells[3:6] == ["a </script> b", "1", "2"]
    assert len(page.cells) == 3 * 5
    assert 'class="cp-provenance"' in part and "gloo · 2 ranks" in part


def test_the_cache_key_moves_with_the_results_it_reads_and_nothing_else(
    tmp_path: Path,
) -> None:
    code = Path(results.__file__)  # any module: its code hash is the baseline

    def key() -> str:
        return results.cache_key(code, "gloo", tmp_path, ("producer",))

    # reading nothing: the plain code hash, so caches written before stay valid
    assert results.cache_key(code, "gloo", tmp_path) == results.code_hash(code, "gloo")
    missing = key()
    (tmp_path / "producer.json").write_text('{"result": 1}')
    first = key()
    (tmp_path / "other.json").write_text('{"result": 2}')  # not read: no matter
    assert key() == first
    (tmp_path / "producer.json").write_text('{"result": 3}')
    assert len({missing, first, key(), results.code_hash(code, "gloo")}) == 4
    (tmp_path / "producer.json").write_text('{"result": 1}')
    assert key() == first  # the same bytes, the same key


def test_the_results_folder_is_the_one_run_all_names_else_the_repos(
    tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.delenv(results.RESULTS_ENV, raising=False)
    assert results.results_folder() == REPO_DIR / "results"
    monkeypatch.setenv(results.RESULTS_ENV, "")
    assert results.results_folder() == REPO_DIR / "results"
    monkeypatch.setenv(results.RESULTS_ENV, str(tmp_path))
    assert results.results_folder() == tmp_path


def test_an_admonition_indents_its_text_under_the_title_within_88_columns() -> None:
    box = results.admonition("info", "What ran", "word " * 60 + "end")
    first, *body = box.rstrip("\n").split("\n")
    assert first == '!!! info "What ran"' and len(body) > 2
    assert all(line.startswith("    ") and len(line) <= 88 for line in body)
    assert " ".join(line.strip() for line in body) == ("word " * 60 + "end")


def test_provenance_names_the_hardware_of_the_backend_and_this_moment() -> None:
    before = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    p = results.provenance("gloo", 3)
    after = datetime.datetime.now(datetime.timezone.utc)
    assert p["device"] == describe_device("gloo") and p["world_size"] == 3
    assert p["backend"] == "gloo" and p["commit"] == results.commit()
    assert p["torch"] == torch.__version__
    assert p["python"] == platform.python_version()
    when = datetime.datetime.strptime(p["utc"], "%Y-%m-%dT%H:%M:%SZ")
    assert before <= when.replace(tzinfo=datetime.timezone.utc) <= after
    assert results.provenance("nccl", 8, device="8× H100")["device"] == "8× H100"
    with pytest.raises(TypeError):  # the device is never taken for the backend
        results.provenance("cpu", "gloo", 2)
    line = fragments.provenance(p)
    assert f"{p['device']} · gloo · 3 ranks · torch {torch.__version__}" in line


def test_needed_results_come_back_or_name_the_command_that_makes_them(
    tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setenv(results.RESULTS_ENV, str(tmp_path))
    record = {"command": "c", "output": "", "provenance": PROVENANCE,
              "result": {"peak": 1.5}}  # fmt: skip
    render.write(tmp_path, "roofline", record)
    assert results.needed("roofline") == {"roofline": {"peak": 1.5}}
    (tmp_path / "broken.json").write_text("{not json")
    for name, by, says in (
        ("nope", "", f"no {tmp_path}/nope.json"),
        ("broken", "--gpu x", f"--gpu x needs {tmp_path}/broken"),
    ):
        with pytest.raises(results.UsageError) as err:
            results.needed("roofline", name, by=by)
        assert str(err.value).startswith(says), err.value
        assert f"run 'python -m snippets run {name}' first" in str(err.value)
