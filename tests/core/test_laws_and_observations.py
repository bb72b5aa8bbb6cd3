"""Every check in snippets/ says which kind it is: a law (fails the run, holds on any
machine) or an observation (what this machine measured, said whichever way it came
out). The audit reads the source, so a check added without a kind fails here."""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

from snippets.core import claims
from snippets.core.claims import Law, Observation
from snippets.tools import registry, run_all

SNIPPETS = Path(__file__).resolve().parents[2] / "snippets"


def sources() -> dict[str, ast.Module]:
    return {
        str(p.relative_to(SNIPPETS.parent)): ast.parse(p.read_text(encoding="utf-8"))
        for p in sorted(SNIPPETS.rglob("*.py"))
    }


def called(node: ast.AST) -> str:
    f = node.func if isinstance(node, ast.Call) else None
    return getattr(f, "id", getattr(f, "attr", ""))


def raised(node: ast.Raise) -> str:
    return called(node.exc) if isinstance(node.exc, ast.Call) else ""


def checks() -> tuple[dict[str, list[str]], list[str]]:
    """(kind → 'file:line' of each marked check, every unmarked one)."""
    marked: dict[str, list[str]] = {"law": [], "observation": []}
    unmarked = []
    for path, tree in sources().items():
        for node in ast.walk(tree):
            where = f"{path}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Assert):  # python -O drops it: not even a law
                unmarked.append(f"{where}: assert")
            elif isinstance(node, ast.Raise) and raised(node) == "AssertionError":
                unmarked.append(f"{where}: raise AssertionError")
            elif isinstance(node, ast.Raise) and raised(node) == "LawBroken":
                marked["law"].append(where)
            elif isinstance(node, ast.Call) and called(node) in ("law", "Law"):
                marked["law"].append(where)
            elif isinstance(node, ast.Call) and called(node) == "Observation":
                marked["observation"].append(where)
            elif isinstance(node, ast.Name) and node.id in ("Claim", "ClaimFailed"):
                unmarked.append(f"{where}: {node.id} (a law or an observation?)")
    return marked, unmarked


def test_every_check_is_a_law_or_an_observation() -> None:
    marked, unmarked = checks()
    assert not unmarked, "checks with no kind:\n" + "\n".join(unmarked)
    # the audit found the checks it is about: a broken walk would find none
    assert len(marked["law"]) > 100 and len(marked["observation"]) >= 10, marked


def observations() -> dict[str, Observation]:
    """Every Observation the snippets define, by 'module.NAME[i]', from the modules
    whose source builds one."""
    found: dict[str, Observation] = {}
    for path, tree in sources().items():
        if not any(called(n) == "Observation" for n in ast.walk(tree)):
            continue
        if path == "snippets/core/claims.py":
            continue
        name = path.removesuffix(".py").replace("/", ".")
        module = importlib.import_module(name)
        for attr, value in vars(module).items():
            items = value if isinstance(value, (list, tuple)) else [value]
            for i, item in enumerate(items):
                if isinstance(item, Observation):
                    found[f"{name}.{attr}[{i}]"] = item
    return found


OBSERVATIONS = observations()


def test_every_observation_built_in_the_source_is_found() -> None:
    # one object per Observation(...) in the source: none hidden where tests miss it
    marked, _ = checks()
    assert len(OBSERVATIONS) == len(marked["observation"]), sorted(OBSERVATIONS)


@pytest.mark.parametrize("name", sorted(OBSERVATIONS))
def test_each_outcome_of_an_observation_is_said_and_never_fails(name: str) -> None:
    obs = OBSERVATIONS[name]
    said = {}
    for outcome, case in obs.cases.items():
        # the data of this outcome gives this outcome, and check() says it
        assert obs.outcome(case) == outcome, (outcome, case)
        (sentence,) = claims.check([obs], case)
        assert sentence == obs.says[outcome].format_map(case)
        said[outcome] = sentence
    assert len(set(said.values())) == len(said), f"two outcomes read alike: {said}"


def test_a_law_among_observations_still_fails_the_run() -> None:
    name, obs = next(iter(sorted(OBSERVATIONS.items())))
    case = next(iter(obs.cases.values()))
    broken = Law("never true", lambda f: False)
    with pytest.raises(claims.LawBroken, match="never true"):
        claims.check([obs, broken], case)


def test_the_observing_snippets_are_those_that_use_an_observation() -> None:
    """`run-all --observing` (what CI checks on the plainest CPU) chooses by syntax;
    the oracle asks the imported modules: a snippet observes when its module holds
    an Observation or names something from a module that does."""
    holders = {key.rsplit(".", 1)[0] for key in OBSERVATIONS}
    entries = registry.snippets_by_name()

    def uses(module) -> bool:
        names = {module.__name__}
        for value in vars(module).values():
            names.add(getattr(value, "__name__" if inspect.ismodule(value) else "", ""))
            names.add(getattr(value, "__module__", ""))
        return bool(names & holders)

    chosen = run_all.observing(entries)
    assert chosen == {n for n, e in entries.items() if uses(e.module)}
    assert {"same_bits", "crash_resume", "cost_model"} <= chosen and "ddp" not in chosen
