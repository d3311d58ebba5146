"""benchmarks/bench_bfcl.py's conversion of BFCL tasks into transcripts, on a hand-made package
laid out as ``bfcl_eval`` is (the figures themselves are not tested, and the real package is not
installed here)."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from salience.bench.references import tool_pairing_errors
from salience.transcript import Transcript

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_bfcl.py"
_spec = importlib.util.spec_from_file_location("bench_bfcl", _PATH)
assert _spec is not None and _spec.loader is not None
bfcl = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bfcl)

BACKEND = '''
class Counter:
    def _load_scenario(self, config, long_context=False):
        self.total = config["start"] * (10 if long_context else 1)

    def add(self, amount, note="none"):
        self.total += amount
        return {"total": self.total, "note": note}

    def shout(self, text):
        return text.upper()

    def fail(self):
        raise ValueError("the counter is jammed")

    def _hidden(self):
        return "never a tool"
'''


@pytest.fixture
def package(fake_package: Callable[[dict[str, str]], Path]) -> Path:
    task = {"id": "multi_turn_base_0", "involved_classes": ["Counter"], "initial_config": {"Counter": {"start": 10}},
            "question": [[{"role": "user", "content": "Add 5 to the counter, note 'first'."}],
                         [{"role": "user", "content": "Shout 'done', then jam it."}],
                         [{"role": "user", "content": "Nothing more."}]]}
    answer = {"id": "multi_turn_base_0",
              "ground_truth": [["add(5, note='first')"], ["shout(text='done')", "fail()"], []]}
    return fake_package({
        "bfcl_eval/__init__.py": "",
        "bfcl_eval/constants/__init__.py": "",
        "bfcl_eval/constants/executable_backend_config.py":
            'CLASS_FILE_PATH_MAPPING = {"Counter": "bfcl_eval.backends.counter"}\nSTATELESS_CLASSES = []\n',
        "bfcl_eval/backends/__init__.py": "",
        "bfcl_eval/backends/counter.py": BACKEND,
        "bfcl_eval/data/BFCL_v4_multi_turn_base.json": json.dumps(task) + "\n",
        "bfcl_eval/data/possible_answer/BFCL_v4_multi_turn_base.json": json.dumps(answer) + "\n",
    })


def test_a_task_becomes_its_turns_and_its_calls_executed_in_the_backend(package: Path) -> None:
    (converted,) = bfcl.transcripts(package, "multi_turn_base", long_context=False)
    assert converted["id"] == "multi_turn_base_0"
    messages = converted["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "user", "assistant", "tool",
                                             "assistant", "tool", "user"]
    assert messages[0]["content"] == "You are an assistant that acts through these tools: add, fail, shout."
    calls = [m["tool_calls"][0] for m in messages if m["role"] == "assistant"]
    # a positional argument is passed by its name; the ids answer one another
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == [
        ("add", {"note": "first", "amount": 5}), ("shout", {"text": "done"}), ("fail", {})]
    results = [m for m in messages if m["role"] == "tool"]
    assert [r["tool_call_id"] for r in results] == [c["id"] for c in calls]
    # executed from the initial state, in order: a dict as JSON, a string as it is, an error as BFCL reports it
    assert json.loads(results[0]["content"]) == {"total": 15, "note": "first"}
    assert results[1]["content"] == "DONE"
    assert results[2]["content"] == "Error during execution: the counter is jammed"
    assert not tool_pairing_errors(messages)
    assert len(Transcript.from_openai(messages).entries) == len(messages)


def test_the_long_context_state_is_loaded_when_asked(package: Path) -> None:
    (converted,) = bfcl.transcripts(package, "multi_turn_base", long_context=True)
    first = next(m for m in converted["messages"] if m["role"] == "tool")
    assert json.loads(first["content"])["total"] == 105


@pytest.mark.parametrize("text", ["a.b()", "add(total())", "add(x=y)", "1 + 2"])
def test_a_call_that_is_not_a_plain_call_of_literals_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        bfcl._call(text)


def test_the_command_line_names_what_is_missing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        bfcl.main(["--bfcl", str(tmp_path)])
    assert exc.value.code == 2
    assert "pip install --no-deps --target" in capsys.readouterr().err
