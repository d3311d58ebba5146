"""benchmarks/bench_agentdojo.py's conversion of AgentDojo's user tasks into sessions, on a
hand-made package laid out as ``agentdojo`` is (the figures themselves are not tested, and the real
package is not installed here)."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from salience.bench.references import tool_pairing_errors
from salience.transcript import Transcript

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_agentdojo.py"
_spec = importlib.util.spec_from_file_location("bench_agentdojo", _PATH)
assert _spec is not None and _spec.loader is not None
agentdojo = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(agentdojo)

RUNTIME = '''
class FunctionsRuntime:
    def __init__(self, functions):
        self.functions = {f.__name__: f for f in functions}

    def run_function(self, env, function, kwargs):
        try:
            return self.functions[function](env, **kwargs), None
        except Exception as e:
            return "", f"{type(e).__name__}: {e}"
'''

FORMATTER = '''
def tool_result_to_str(result):
    return "yaml: " + repr(result) if isinstance(result, (dict, list)) else str(result)
'''

SUITES = '''
class Call:
    def __init__(self, function, args):
        self.function, self.args = function, args


def pay(env, to, amount):
    env["balance"] -= amount
    return {"message": f"Sent {amount} to {to}."}


def balance(env):
    return env["balance"]


def history(env):
    return ["paid UK12", "paid DE34"]


def fail(env):
    raise ValueError("the bank is closed")


class Pay:
    PROMPT = "Pay 30 to UK12."
    def ground_truth(self, env):
        return [Call("pay", {"to": "UK12", "amount": 30})]


class Balance:
    PROMPT = "What is my balance?"
    GROUND_TRUTH_OUTPUT = "Your balance is 70."
    def ground_truth(self, env):
        return [Call("balance", {}), Call("history", {})]


class Fail:
    PROMPT = "Close my account."
    GROUND_TRUTH_OUTPUT = ""
    def ground_truth(self, env):
        return [Call("fail", {})]


class Suite:
    tools = [pay, balance, history, fail]
    user_tasks = {"user_task_10": Fail(), "user_task_1": Balance(), "user_task_0": Pay()}

    def get_injection_vector_defaults(self):
        return {"bill": "a bill"}

    def load_and_inject_default_environment(self, injections):
        assert injections == {"bill": "a bill"}
        return {"balance": 100}


def get_suites(version):
    assert version == "v1.2.2"
    return {"banking": Suite()}
'''


@pytest.fixture
def package(fake_package: Callable[[dict[str, str]], Path]) -> Path:
    return fake_package({
        "agentdojo/__init__.py": "",
        "agentdojo/data/system_messages.yaml": "default: |\n  You assist Emma.\n  Use the tools.\n",
        "agentdojo/agent_pipeline/__init__.py": "",
        "agentdojo/agent_pipeline/tool_execution.py": FORMATTER,
        "agentdojo/functions_runtime.py": RUNTIME,
        "agentdojo/task_suite/__init__.py": "",
        "agentdojo/task_suite/load_suites.py": SUITES,
    })


def test_tasks_in_order_become_one_session_on_one_environment(package: Path) -> None:
    (converted,) = agentdojo.transcripts(package, "banking", per_session=3)
    assert converted["id"] == "banking/user_task_0..user_task_10"
    messages = converted["messages"]
    assert messages[0] == {"role": "system", "content": "You assist Emma.\nUse the tools."}
    # tasks by their number (10 after 1), each a user turn, its calls and a closing answer
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "assistant",
                                             "user", "assistant", "tool", "assistant", "tool", "assistant",
                                             "user", "assistant", "tool", "assistant"]
    assert [m["content"] for m in messages if m["role"] == "user"] == [
        "Pay 30 to UK12.", "What is my balance?", "Close my account."]
    calls = [m["tool_calls"][0] for m in messages if m.get("tool_calls")]
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == [
        ("pay", {"to": "UK12", "amount": 30}), ("balance", {}), ("history", {}), ("fail", {})]
    results = [m for m in messages if m["role"] == "tool"]
    assert [r["tool_call_id"] for r in results] == [c["id"] for c in calls]
    # executed in order on one environment: the balance after the payment; AgentDojo's
    # formatter for what is not a string; the error as the runtime reports it
    assert results[0]["content"] == "yaml: {'message': 'Sent 30 to UK12.'}"
    assert results[1]["content"] == "70"
    assert results[2]["content"] == "yaml: ['paid UK12', 'paid DE34']"
    assert results[3]["content"] == "ValueError: the bank is closed"
    # the expected answer closes a task; "Done." where it gives none (or an empty one)
    closing = [m["content"] for m in messages if m["role"] == "assistant" and not m.get("tool_calls")]
    assert closing == [agentdojo.DONE, "Your balance is 70.", agentdojo.DONE]
    assert not tool_pairing_errors(messages)
    assert len(Transcript.from_openai(messages).entries) == len(messages)


def test_each_session_starts_from_a_fresh_environment(package: Path) -> None:
    first, second = agentdojo.transcripts(package, "banking", per_session=2)
    assert first["id"] == "banking/user_task_0..user_task_1"
    assert second["id"] == "banking/user_task_10..user_task_10"
    balance = next(m for m in first["messages"] if m["role"] == "tool" and m["content"].isdigit())
    assert balance["content"] == "70"
    assert [m["content"] for m in second["messages"] if m["role"] == "user"] == ["Close my account."]
    loaded = agentdojo.load(package, "banking", per_session=2)
    assert [t.id for t in loaded] == [first["id"], second["id"]]


@pytest.mark.parametrize("argv, message", [
    ([], "pip install --target"),
    (["--suites", "banking,poker"], "unknown ['poker']"),
    (["--per-session", "0"], "--per-session"),
])
def test_the_command_line_names_what_is_wrong(package: Path, tmp_path: Path, argv: list[str], message: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    where = tmp_path / "nothing" if not argv else package
    with pytest.raises(SystemExit) as exc:
        agentdojo.main(["--agentdojo", str(where), *argv])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err
