"""The error tree (issue #11): one base, and every error that bad input reaches is under it.

* the tree that ``salience.errors`` draws is the one it defines;
* bad parameters and arguments across the library raise a :class:`ParameterError`
  (a ``ValueError``; a wrong type is a :class:`ParameterTypeError`, also a ``TypeError``;
  an unknown key a :class:`ParameterKeyError`, also a ``KeyError``), with the message
  they had before;
* the source holds no bare ``raise ValueError(...)`` or ``raise TypeError(...)`` but
  internal ones, each marked ``# internal:`` with its reason.
"""

from __future__ import annotations

import ast
import inspect
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import salience.errors as errors
from salience.errors import ParameterError, ParameterKeyError, ParameterTypeError, SalienceError
from salience.selector import knapsack

SRC = Path(errors.__file__).resolve().parent

#: Raise sites that belong to other open changes (their owners convert them; listed so
#: that no new bare raise slips in). Path -> how many bare raises it still has.
PENDING: dict[str, int] = {}


def _error_classes() -> dict[str, type[BaseException]]:
    return {name: obj for name, obj in vars(errors).items()
            if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == errors.__name__}


def test_every_error_is_a_salience_error_and_exported() -> None:
    classes = _error_classes()
    assert set(classes) <= set(errors.__all__)
    for name, cls in classes.items():
        assert issubclass(cls, SalienceError), name
    assert issubclass(knapsack.InfeasibleError, SalienceError)
    assert issubclass(knapsack.InfeasibleError, ValueError)


def test_the_docstring_draws_every_class() -> None:
    tree = errors.__doc__ or ""
    drawn = set(re.findall(r"[├└]── (\w+)", tree)) | {"SalienceError"}
    assert drawn == set(_error_classes()) | {"InfeasibleError"}


@pytest.mark.parametrize(("cls", "builtins"), [
    (ParameterError, (ValueError,)),
    (ParameterTypeError, (ValueError, TypeError)),
    (ParameterKeyError, (ValueError, KeyError)),
], ids=["value", "type", "key"])
def test_parameter_errors_keep_the_builtin_excepts_working(cls: type[Exception], builtins: tuple[type, ...]) -> None:
    for builtin in builtins:
        with pytest.raises(builtin):
            raise cls("x")
    assert issubclass(cls, ParameterError)


def test_a_parameter_key_error_reads_as_its_message() -> None:
    assert str(ParameterKeyError("no entry 'm9'")) == "no entry 'm9'"
    assert str(KeyError("no entry 'm9'")) == "\"no entry 'm9'\""  # what a plain KeyError would show


def _compactor(**params: Any) -> Any:
    from salience.scorer.baselines import make_baseline
    from salience.selector.compactor import Compactor

    return Compactor(scorer=make_baseline("recency"), budget=params.pop("budget", 100), counter=len, **params)


_MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello there"}]


def _compact(**kwargs: Any) -> Callable[[], Any]:
    return lambda: _compactor().compact(_MESSAGES, **kwargs)


def _restore_unknown() -> Any:
    return _compactor(budget=1_000).compact(_MESSAGES).restore(["nope"])


def _transcript_index() -> Any:
    from salience.transcript import Transcript

    return Transcript.from_openai(_MESSAGES, id="t").index("nope")


def _split(**kwargs: Any) -> Callable[[], Any]:
    from salience.training.split import split_transcripts
    from salience.transcript import Transcript

    return lambda: split_transcripts([Transcript(id=f"t{i}") for i in range(4)], **kwargs)


def _fit(**params: Any) -> Callable[[], Any]:
    from salience.scorer.model import ImportanceScorer

    return lambda: ImportanceScorer(**params).fit([])


def _policy(data: Any) -> Callable[[], Any]:
    from salience.selector.masking import PhasePolicy

    return lambda: PhasePolicy.from_dict(data)


def _encode(texts: Any) -> Callable[[], Any]:
    from salience.scorer.embeddings import Embedder

    return lambda: Embedder().encode(texts)


def _solve(costs: Any, budget: Any = 10, **kwargs: Any) -> Callable[[], Any]:
    return lambda: knapsack.solve(costs, [[1.0, 0.5, 0.1, 0.0]] * len(costs), budget, **kwargs)


def _stats(**kwargs: Any) -> Callable[[], Any]:
    from salience.stats import transcript_stats

    return lambda: transcript_stats([], **kwargs)


def _to_transcript(**kwargs: Any) -> Callable[[], Any]:
    from salience.messages.dispatch import to_transcript

    return lambda: to_transcript(_MESSAGES, system=None, **kwargs)


def _pending(**kwargs: Any) -> Callable[[], Any]:
    from salience.messages.validate import pending_calls

    return lambda: pending_calls(_MESSAGES, **kwargs)


def _fractions(value: Any) -> Callable[[], Any]:
    from salience.bench.metrics import check_fractions

    return lambda: check_fractions(value, "bench")


def _report_curve() -> Any:
    from salience.bench.report import BenchReport

    return BenchReport(curves=()).curve("salience", "query")


#: (call, the error it raises, the message it must still give).
BAD_INPUT = {
    "compact-budget-0": (_compact(budget=0), ParameterError, r"budget must be a positive int number of tokens"),
    "compact-query-type": (_compact(query=3), ParameterTypeError, r"query must be a str or None \(got 3"),
    "compactor-solver": (lambda: _compactor(solver="fast").compact(_MESSAGES), ParameterError,
                         r"parameter 'solver' must be one of"),
    "compactor-pin-system": (lambda: _compactor(pin_system="yes").compact(_MESSAGES), ParameterTypeError,
                             r"parameter 'pin_system' must be a bool"),
    "compactor-unknown-param": (lambda: _compactor().set_params(nope=1), ParameterError,
                                r"Compactor: unknown parameter 'nope'"),
    "restore-unknown-id": (_restore_unknown, ParameterKeyError, r"restore: no entry with id 'nope'"),
    "transcript-index": (_transcript_index, ParameterKeyError, r"transcript 't' has no entry 'nope'"),
    "knapsack-shape": (_solve([[1, 2, 3]]), ParameterError, r"costs must have shape \(n, 4\)"),
    "knapsack-budget-bool": (_solve([[3, 2, 1, 0]], budget=True), ParameterTypeError, r"must be an integer"),
    "knapsack-method": (_solve([[3, 2, 1, 0]], method="magic"), ParameterError, r"method must be one of"),
    "knapsack-infeasible": (_solve([[3, 2, 1, 0]], budget=0, allowed=[[True, False, False, False]]),
                            knapsack.InfeasibleError, r"budget"),
    "policy-not-a-mapping": (_policy(3), ParameterTypeError, r"PhasePolicy\.from_dict: expected a mapping"),
    "policy-unknown-key": (_policy({"name": "x", "rules": {}, "colour": 1}), ParameterError, r"unknown keys"),
    "split-test-size": (_split(test_size=1.5), ParameterError, r"test_size must be a share in \(0, 1\)"),
    "split-seed": (_split(seed="0"), ParameterTypeError, r"split_transcripts: seed must be an int"),
    "scorer-calibration": (_fit(calibration="magic"), ParameterError, r"calibration must be 'auto', 'isotonic'"),
    "scorer-estimator": (_fit(estimator=object()), ParameterTypeError, r"estimator must be a classifier"),
    "embedder-one-str": (_encode("text"), ParameterTypeError, r"'texts' must be a sequence of str, not a str"),
    "stats-top": (_stats(top=-1), ParameterError, r"top must be a non-negative int or None \(got -1\)"),
    "format-unknown": (_to_transcript(format="yaml"), ParameterError, r"format must be one of"),
    "pending-format": (_pending(format="yaml"), ParameterError, r"format must be 'openai' or 'anthropic'"),
    "bench-fractions": (_fractions([1.5]), ParameterError, r"bench: each budget must be a share of the tokens"),
    "bench-report-curve": (_report_curve, ParameterKeyError, r"no curve for method 'salience' on 'query'"),
}


@pytest.mark.parametrize(("call", "cls", "message"), list(BAD_INPUT.values()), ids=list(BAD_INPUT))
def test_bad_input_is_a_salience_error(call: Callable[[], Any], cls: type[Exception], message: str) -> None:
    with pytest.raises(cls, match=message) as info:
        call()
    assert isinstance(info.value, SalienceError)
    assert isinstance(info.value, ValueError)  # what ``except ValueError`` caught before


def _bare_raises(path: Path) -> list[tuple[int, str]]:
    """``raise ValueError(...)`` / ``raise TypeError(...)`` in ``path`` not marked ``# internal:``."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out = []
    for node in ast.walk(ast.parse("\n".join(lines))):
        if (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and isinstance(node.exc.func, ast.Name)
                and node.exc.func.id in ("ValueError", "TypeError")):
            above = lines[node.lineno - 2] if node.lineno > 1 else ""
            if "# internal:" not in lines[node.lineno - 1] and "# internal:" not in above:
                out.append((node.lineno, lines[node.lineno - 1].strip()))
    return out


def test_no_bare_value_or_type_error_reachable_by_bad_input() -> None:
    found = {str(p.relative_to(SRC)): _bare_raises(p) for p in sorted(SRC.rglob("*.py"))}
    found = {k: v for k, v in found.items() if v}
    grown = {k: v for k, v in found.items() if k in PENDING and len(v) > PENDING[k]}
    assert grown == {}, "a new bare raise in a module whose old ones are pending"
    assert {k: v for k, v in found.items() if k not in PENDING} == {}
