"""The explorer's Vega expressions, evaluated here, equal cost_formulas.predict (the
Python formulas, the oracle) at many sizes, rank counts and machines; its winner band
is the Python winner; the fit is read from cost_model's results in the results folder
run-all names, or said missing."""

from __future__ import annotations

import argparse
import json
import math
import random
import re

import pytest

from snippets.comm.cost import cost_model_explorer as ex
from snippets.core import results
from snippets.core.charts import validate
from snippets.sizing.cost_formulas import FORMULAS, Machine, predict
from snippets.tools.registry import REPO_DIR

# the only names a Vega expression here may use; all mean the same in Python
VEGA = {"sqrt": math.sqrt, "log": math.log, "floor": math.floor, "pow": math.pow,
        "min": min, "max": max, "LN2": math.log(2)}  # fmt: skip


def vega_compile(expr: str):
    """A tiny evaluator for the subset used: numbers, + - * /, calls of VEGA, array
    literals indexed by p. Anything else is refused rather than read as Python."""
    bare = re.sub(r"(?<![A-Za-z_])\d[\d.]*(e[+-]?\d+)?", "", expr)
    names = set(re.findall(r"[A-Za-z_][A-Za-z_0-9.]*", bare))
    assert names <= set(VEGA) | {"datum.x", "p", "alpha", "beta"}, names
    assert not re.search(r"[^\w\s.,+\-*/()\[\]]", expr), (
        "an operator outside the subset"
    )
    code = compile(expr.replace("datum.x", "x"), "<vega>", "eval")

    def at(n: float, p: int, m: Machine) -> float:
        scope = VEGA | {"x": n, "p": p, "alpha": m.alpha, "beta": m.beta}
        return eval(code, {"__builtins__": {}}, scope)

    return at


def vega_eval(expr: str, n: float, p: int, m: Machine) -> float:
    return vega_compile(expr)(n, p, m)


def test_expressions_equal_the_python_formulas_at_many_points() -> None:
    rng = random.Random(0)
    for name in FORMULAS:
        for gamma in (0.0, 4e-11, 3e-10):
            at = vega_compile(ex.expression(name, gamma))
            for _ in range(150):
                m = Machine(
                    10 ** rng.uniform(-7, -2), 10 ** rng.uniform(-12, -7), gamma
                )
                p = rng.randint(2, ex.P_MAX)
                n = 2 ** rng.uniform(0, 34)
                if rng.random() < 0.3:
                    n = float(
                        2 ** rng.randint(0, 34)
                    )  # exact powers: the k-range edges
                want = predict(name, p, n, m)
                assert at(n, p, m) == pytest.approx(want, rel=1e-9), (name, p, n, m)


def test_a_wrong_coefficient_is_caught() -> None:
    m, good = Machine(1e-5, 1e-10), ex.expression("ring", 0.0)
    bad = good.replace("[0.0,0.0,2.0,", "[0.0,0.0,3.0,", 1)  # ring's α at p=2
    assert bad != good
    assert vega_eval(bad, 8.0, 2, m) != pytest.approx(predict("ring", 2, 8.0, m))


def test_the_figure_starts_at_the_fit_and_names_the_python_winners(tmp_path) -> None:
    fit = tmp_path / "cost_model.json"
    fit.write_text(json.dumps({"result": {"alpha_s": 2e-4, "beta_s_per_byte": 5e-10,
                                          "gamma_s_per_byte": 0.0}}))  # fmt: skip
    m, _ = ex.fitted(str(fit))
    assert m == Machine(2e-4, 5e-10, 0.0)
    spec = ex.explorer(m, p=6)
    validate(spec)
    params = {q["name"]: q for q in spec["params"]}
    assert params["log_alpha"]["value"] == pytest.approx(math.log10(2e-4), abs=0.01)
    assert params["p"]["value"] == 6 and params["alpha"]["expr"] == "pow(10, log_alpha)"
    for row in spec["data"]["values"]:
        times = {k: predict(k, 6, row["x"], m) for k in FORMULAS}
        assert row["winner"] == min(times, key=times.get)
        assert row["fitted best (s)"] == pytest.approx(min(times.values()))
    assert ex.fitted(str(tmp_path / "absent.json"))[0] is None


def test_without_a_fit_it_says_so_and_still_draws(capsys) -> None:
    result = ex.main(fit="/nonexistent/cost_model.json")
    assert "no fit read from /nonexistent/cost_model.json" in capsys.readouterr().out
    assert result["fitted"] is None and "explorer" in result["figures"]
    layers = result["figures"]["explorer"]["layer"]
    assert len(layers) == 2  # no fitted curve to draw


def test_the_fit_is_read_from_the_results_folder_unless_given(
    tmp_path, monkeypatch, capsys
) -> None:
    """With no --fit, main() and the option's default read cost_model.json in the
    folder run-all names (COMMONPLACE_RESULTS); --fit FILE still wins."""
    fit = tmp_path / "cost_model.json"
    fit.write_text(json.dumps({"result": {"alpha_s": 3e-6, "beta_s_per_byte": 2e-11}}))
    monkeypatch.setenv(results.RESULTS_ENV, str(tmp_path))
    assert ex.main()["fitted"] == vars(Machine(3e-6, 2e-11, 0.0))
    parser = argparse.ArgumentParser()
    ex.add_arguments(parser)
    assert parser.parse_args([]).fit == str(fit)
    assert parser.parse_args(["--fit", "x.json"]).fit == "x.json"
    monkeypatch.setenv(results.RESULTS_ENV, str(tmp_path / "empty"))
    assert ex.main()["fitted"] is None
    assert f"no fit read from {tmp_path / 'empty' / 'cost_model.json'}" in (
        capsys.readouterr().out
    )
    monkeypatch.delenv(results.RESULTS_ENV)
    parser = argparse.ArgumentParser()
    ex.add_arguments(parser)
    assert parser.parse_args([]).fit == str(REPO_DIR / "results" / "cost_model.json")
