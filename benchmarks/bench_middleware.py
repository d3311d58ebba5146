"""SalienceMiddleware against LangChain 1.x's own context middleware (issue #13, "Measure").

Each shared tool-use set is replayed step by step, as :mod:`salience.bench.independent`
replays it: at each measured assistant step the history before it is the request an
agent built with ``langchain.agents.create_agent`` would send, and the budget is the
system prompt plus 10% and 25% of the other tokens (cl100k text tokens, no per-message
overhead: :func:`salience.bench.independent.history_budget`). The history becomes a real
``langchain.agents.middleware.ModelRequest`` (the first system message as
``system_message``, the rest as LangChain messages, a fake chat model that is never
called), and each middleware edits it with its real hook:

* ``SalienceMiddleware``: ``wrap_model_call(request, handler)`` with a handler that
  captures the request it is handed; ``Compactor(scorer=..., counter=<text tokens>)``,
  ``budget=`` the step's budget, ``session=False`` (each step is a fresh request; one
  session per thread needs one budget for the whole run);
* ``ContextEditingMiddleware(edits=[ClearToolUsesEdit(...)], token_counter=<text tokens>)``:
  ``wrap_model_call`` the same way. Its counter sees ``request.messages`` (not the system
  message), so ``trigger = budget - system tokens``: it edits exactly when the request is
  over the budget. Two settings: LangChain's defaults besides the trigger (``keep=3``,
  ``clear_at_least=0``: clear every tool result but the last three), and the best case for
  it (``keep=0`` and ``clear_at_least`` = the step's excess: the oldest results first, only
  as many as the budget needs; a real agent cannot know the excess in advance);
* ``SummarizationMiddleware``: ``before_model(state, runtime)``, its update applied as
  LangGraph's ``add_messages`` would (``RemoveMessage(REMOVE_ALL_MESSAGES)`` then the
  summary message and the kept messages), the system message put back in front.
  ``trigger=("tokens", budget - system + 1)``, ``keep=("tokens", budget - system - the
  summary message's tokens)``, the same counter. No real model is called: its
  ``summarizer`` returns a fixed placeholder, so the rows measure what it *keeps*; a real
  summary could carry some of the dropped values, and costs a model call per summary;
* the plain sliding window (:func:`salience.bench.independent.sliding_window`), for reference.

The edited messages come back to OpenAI messages (a message whose LangChain id and content
are unchanged is the original dict, so the text scored is the text sent) and are scored by
:func:`salience.bench.independent.evaluate`: the independent reference recall and ours
(``salience bench``'s), micro-averaged; an output over the budget, or a ``BudgetError``,
scores nothing at that step and is counted.

Scorers: ``salience.default_scorer()`` was trained on every shared set, so its rows are
in-domain; the leave-one-data-set-out scorers of ``benchmarks/bench_unseen.py`` (trained,
or read from its cache in ``benchmarks/out/lodo/``, by its own functions) give the unseen rows.

Prints a table per data set and one of the mean and worst across sets; writes
``benchmarks/out/middleware.json``. Not part of the tests. From the repository root::

    python benchmarks/bench_middleware.py [--data ../shared/data] [--max-steps 6] [--domains tooltalk,api-bank]
        [--no-lodo]
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
try:
    import salience
except ImportError:  # running from a checkout without installing
    sys.path.insert(0, str(HERE.parent / "src"))
    import salience
sys.path.insert(0, str(HERE))

from langchain.agents.middleware import (  # noqa: E402
    ClearToolUsesEdit,
    ContextEditingMiddleware,
    ModelRequest,
    SummarizationMiddleware,
)
from langchain_core.language_models.fake_chat_models import FakeListChatModel  # noqa: E402
from langchain_core.messages import (  # noqa: E402
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from salience import Compactor, TokenCounter, default_scorer, load_transcripts  # noqa: E402
from salience.adapters.langchain import SalienceMiddleware  # noqa: E402
from salience.bench.independent import (  # noqa: E402
    evaluate,
    history_budget,
    message_text,
    messages_tokens,
    sliding_window,
)

Message = Mapping[str, Any]
TEXT_TOKENS = TokenCounter("cl100k_base", message_overhead=0, call_overhead=0)
ROOT = HERE.parent
OUT = ROOT / "benchmarks" / "out"
REMOVE_ALL = "__remove_all__"  # langgraph.graph.message.REMOVE_ALL_MESSAGES
PLACEHOLDER = "[summary placeholder: no model was called]"
SUMMARY_PREFIX = "Here is a summary of the conversation to date:\n\n"  # what SummarizationMiddleware writes

console = Console(width=200)


def note(text: str) -> None:
    console.print(f"[dim]{time.strftime('%H:%M:%S')}[/dim] {text}")


# --------------------------------------------------------------------------
# OpenAI messages <-> a LangChain model request
# --------------------------------------------------------------------------


def _args(arguments: Any) -> dict[str, Any]:
    if isinstance(arguments, dict):
        return arguments
    try:
        value = json.loads(arguments or "{}")
    except (TypeError, ValueError):
        return {"__arguments__": str(arguments)}
    return value if isinstance(value, dict) else {"__arguments__": value}


def to_langchain(messages: Sequence[Message]) -> list[BaseMessage]:
    """``messages`` as LangChain messages, each with the id ``h<index>``."""
    out: list[BaseMessage] = []
    for i, m in enumerate(messages):
        role, content, mid = m.get("role"), m.get("content") or "", f"h{i}"
        if role == "system":
            out.append(SystemMessage(content=content, id=mid))
        elif role == "assistant":
            calls = [{"id": c.get("id") or f"call{i}_{k}", "name": c.get("function", {}).get("name") or "",
                      "args": _args(c.get("function", {}).get("arguments")), "type": "tool_call"}
                     for k, c in enumerate(m.get("tool_calls") or [])]
            out.append(AIMessage(content=content, tool_calls=calls, id=mid))
        elif role == "tool":
            out.append(ToolMessage(content=content, tool_call_id=m.get("tool_call_id") or "", name=m.get("name"),
                                   id=mid))
        else:
            out.append(HumanMessage(content=content, id=mid))
    return out


def to_openai(messages: Iterable[BaseMessage], originals: Sequence[Message]) -> list[Message]:
    """LangChain ``messages`` back to OpenAI ones: an ``h<index>`` message is its original
    dict (with the new content if the middleware changed it); a new message is written out."""
    out: list[Message] = []
    for m in messages:
        mid = m.id or ""
        if mid.startswith("h") and mid[1:].isdigit() and int(mid[1:]) < len(originals):
            orig = originals[int(mid[1:])]
            out.append(orig if m.content == (orig.get("content") or "") else {**orig, "content": m.content})
            continue
        role = {"system": "system", "ai": "assistant", "tool": "tool"}.get(m.type, "user")
        msg: dict[str, Any] = {"role": role, "content": m.content}
        if isinstance(m, AIMessage) and m.tool_calls:
            msg["tool_calls"] = [{"id": c["id"], "type": "function", "function": {
                "name": c["name"], "arguments": json.dumps(c["args"], ensure_ascii=False)}} for c in m.tool_calls]
        if isinstance(m, ToolMessage):
            msg["tool_call_id"] = m.tool_call_id
        out.append(msg)
    return out


def model_request(history: Sequence[Message]) -> tuple[ModelRequest, list[BaseMessage]]:
    """The ``ModelRequest`` of ``history`` as ``create_agent`` builds it: the first system
    message as ``system_message``, the others as ``messages`` (also the state's)."""
    lc = to_langchain(history)
    system = lc[0] if lc and isinstance(lc[0], SystemMessage) else None
    rest = lc[1:] if system is not None else lc
    request = ModelRequest(model=FakeListChatModel(responses=["never called"]), messages=list(rest),
                           system_message=system, tools=[], state={"messages": list(rest)}, runtime=None)
    return request, lc


def through_wrap_model_call(middleware: Any, request: ModelRequest) -> list[BaseMessage]:
    """The messages ``middleware.wrap_model_call`` hands the model: its real hook, with a
    handler that captures the edited request instead of calling a model."""
    seen: list[ModelRequest] = []

    def handler(edited: ModelRequest) -> AIMessage:
        seen.append(edited)
        return AIMessage(content="")

    middleware.wrap_model_call(request, handler)
    if len(seen) != 1:
        raise RuntimeError(f"{type(middleware).__name__}.wrap_model_call called the model {len(seen)} times")
    edited = seen[0]
    return ([edited.system_message] if edited.system_message is not None else []) + list(edited.messages)


def through_before_model(middleware: Any, request: ModelRequest) -> list[BaseMessage]:
    """The messages after ``middleware.before_model``'s state update, applied as LangGraph's
    ``add_messages`` does (a ``RemoveMessage(REMOVE_ALL_MESSAGES)`` clears what came before)."""
    state = {"messages": list(request.messages)}
    update = middleware.before_model(state, request.runtime)
    messages = list(request.messages)
    if update and "messages" in update:
        new = list(update["messages"])
        cut = max((i for i, m in enumerate(new) if isinstance(m, RemoveMessage) and m.id == REMOVE_ALL), default=-1)
        if cut < 0:
            raise RuntimeError("before_model returned messages without RemoveMessage(REMOVE_ALL_MESSAGES)")
        messages = [m for m in new[cut + 1:] if not isinstance(m, RemoveMessage)]
    return ([request.system_message] if request.system_message is not None else []) + messages


# --------------------------------------------------------------------------
# the selectors: one middleware per step, at that step's budget
# --------------------------------------------------------------------------

Selector = Callable[[Sequence[Message], int], Sequence[Message]]


class LCCounter:
    """The benchmark's count (cl100k text tokens of :func:`message_text`) of LangChain messages,
    cached per (id, content)."""

    def __init__(self, originals: Sequence[Message] = ()) -> None:
        self.originals = originals
        self.cache: dict[tuple[str, str], int] = {}

    def __call__(self, messages: Sequence[BaseMessage]) -> int:
        total = 0
        for m in messages:
            key = (m.id or "", m.content if isinstance(m.content, str) else json.dumps(m.content))
            n = self.cache.get(key)
            if n is None:
                n = self.cache[key] = TEXT_TOKENS.count(message_text(to_openai([m], self.originals)[0]))
            total += n
        return total


def _split(history: Sequence[Message], budget: int) -> tuple[ModelRequest, LCCounter, int, int]:
    request, lc = model_request(history)
    counter = LCCounter(history)
    system = counter([request.system_message]) if request.system_message is not None else 0
    return request, counter, budget - system, counter(request.messages)


def salience_selector(compactor: Compactor) -> Selector:
    def select(history: Sequence[Message], budget: int) -> Sequence[Message]:
        request, _ = model_request(history)
        mw = SalienceMiddleware(compactor, budget=budget, session=False)
        return to_openai(through_wrap_model_call(mw, request), history)

    return select


def clear_tool_uses_selector(*, keep: int, fit: bool) -> Selector:
    """``ContextEditingMiddleware(ClearToolUsesEdit(trigger=budget - system, keep=keep))``;
    ``fit``: ``clear_at_least`` = the step's excess over the budget."""

    def select(history: Sequence[Message], budget: int) -> Sequence[Message]:
        request, counter, left, tokens = _split(history, budget)
        edit = ClearToolUsesEdit(trigger=left, keep=keep, clear_at_least=max(0, tokens - left) if fit else 0)
        mw = ContextEditingMiddleware(edits=[edit], token_counter=counter)
        return to_openai(through_wrap_model_call(mw, request), history)

    return select


def _placeholder_summary(messages: Sequence[BaseMessage]) -> str:
    return PLACEHOLDER


SUMMARY_TOKENS = TEXT_TOKENS.count(SUMMARY_PREFIX + PLACEHOLDER)


def summarization_selector() -> Selector:
    def select(history: Sequence[Message], budget: int) -> Sequence[Message]:
        request, counter, left, _ = _split(history, budget)
        mw = SummarizationMiddleware(FakeListChatModel(responses=["never called"]),
                                     trigger=("tokens", max(1, left + 1)),
                                     keep=("tokens", max(1, left - SUMMARY_TOKENS)),
                                     token_counter=counter, summarizer=_placeholder_summary)
        return to_openai(through_before_model(mw, request), history)

    return select


def window_selector(history: Sequence[Message], budget: int) -> Sequence[Message]:
    return sliding_window(history, budget, counter=TEXT_TOKENS)


def same_tokens_selector(compactor: Compactor, other: Selector) -> Selector:
    """SalienceMiddleware at the tokens ``other`` sent (when over the budget; else at the budget)."""
    salience_select = salience_selector(compactor)

    def select(history: Sequence[Message], budget: int) -> Sequence[Message]:
        sent = messages_tokens(other(history, budget), TEXT_TOKENS)
        return salience_select(history, max(budget, sent))

    return select


class Recorder:
    """``selector`` that also adds up the tokens it sent and the budgets it was given."""

    def __init__(self, selector: Selector) -> None:
        self.selector = selector
        self.sent = self.budget = self.calls = 0

    def __call__(self, history: Sequence[Message], budget: int) -> Sequence[Message]:
        out = self.selector(history, budget)
        self.sent += messages_tokens(out, TEXT_TOKENS)
        self.budget += budget
        self.calls += 1
        return out


def uncapped(selector: Selector, fraction: float) -> Selector:
    """``selector`` at the step's real budget, for an :func:`evaluate` run whose own budget check is
    switched off (a counter that counts nothing): what the request holds *as sent*, over budget or not."""

    def select(history: Sequence[Message], budget: int) -> Sequence[Message]:
        return selector(history, history_budget(history, fraction, TEXT_TOKENS))

    return select


def _nothing(text: str) -> int:
    return 0


# --------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------

DEFAULT_ROW = "SalienceMiddleware, default scorer (in-domain)"
LODO_ROW = "SalienceMiddleware, LODO scorer (unseen)"
CLEAR_DEFAULT = "ContextEditing(ClearToolUsesEdit keep=3)"
CLEAR_FIT = "ContextEditing(ClearToolUsesEdit keep=0, at_least=excess)"
SUMMARY = "Summarization (placeholder summary)"
WINDOW = "sliding window"
SAME_TOKENS = "SalienceMiddleware (default) at keep=3's tokens"
DESCRIPTIONS = {
    DEFAULT_ROW: "SalienceMiddleware(Compactor(scorer=default_scorer(), counter=text tokens), budget=step budget, "
                 "session=False).wrap_model_call; the default scorer was trained on every shared set",
    LODO_ROW: "the same with the leave-one-data-set-out scorer of benchmarks/bench_unseen.py (train_lodo)",
    CLEAR_DEFAULT: "ContextEditingMiddleware(edits=[ClearToolUsesEdit(trigger=budget - system tokens, keep=3)], "
                   "token_counter=text tokens).wrap_model_call",
    CLEAR_FIT: "the same with keep=0, clear_at_least=request tokens - (budget - system tokens): the oldest tool "
               "results first, as many as the budget needs (best case; needs the excess known in advance)",
    SUMMARY: "SummarizationMiddleware(fake model, trigger=('tokens', budget - system + 1), keep=('tokens', "
             "budget - system - summary tokens), token_counter=text tokens, summarizer=<fixed placeholder>)"
             ".before_model, update applied as add_messages does",
    WINDOW: "salience.bench.independent.sliding_window",
    SAME_TOKENS: "as sent only: the default-scorer SalienceMiddleware with the budget raised to the tokens "
                 "ClearToolUsesEdit keep=3 sent at that step (when it sent more than the budget)",
}
#: The methods that can send more than the budget, measured again as sent.
AS_SENT = (CLEAR_DEFAULT, CLEAR_FIT, SUMMARY)
FIGURES = (("independent", "indep."), ("ours", "ours"))


def _f(x: Any) -> str:
    return "-" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.3f}"


def domain_rows(report: Mapping[str, Any], recorders: Mapping[str, Recorder]) -> dict[str, dict[str, dict[str, Any]]]:
    """method -> fraction -> {independent, ours, over_budget, budget_errors, calls, invalid, sent_per_budget}."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for r in report["results"]:
        out.setdefault(r["method"], {})[str(r["fraction"])] = {
            "independent": r["independent"]["micro"], "ours": r["ours"]["micro"],
            "over_budget": r["over_budget"], "budget_errors": r["budget_errors"], "calls": r["calls"],
            "invalid": r["invalid"], "seconds": r["seconds"]}
    for method, rec in recorders.items():  # one recorder per (method, fraction)
        name, _, f = method.rpartition("@")
        out[name][f]["sent_per_budget"] = rec.sent / rec.budget if rec.budget else None
    return out


def add_as_sent(rows: dict[str, dict[str, dict[str, Any]]], report: Mapping[str, Any]) -> None:
    for r in report["results"]:
        cell = rows.setdefault(r["method"], {}).setdefault(str(r["fraction"]), {})
        cell["independent_as_sent"] = r["independent"]["micro"]
        cell["ours_as_sent"] = r["ours"]["micro"]


def _as_sent(cell: Mapping[str, Any], key: str) -> Any:
    """As sent: measured again for the methods that can go over; the same as within budget otherwise."""
    if f"{key}_as_sent" in cell:
        return cell[f"{key}_as_sent"]
    return cell.get(key) if cell.get("over_budget") == 0 and "calls" in cell else None


def summarise(rows: Mapping[str, Mapping[str, Any]], fractions: Sequence[float]) -> dict[str, Any]:
    methods = list(dict.fromkeys(m for d in rows.values() for m in d))
    out: dict[str, Any] = {}
    for method in methods:
        per: dict[str, Any] = {}
        for f in fractions:
            cell: dict[str, Any] = {}
            cells = {d: r[method][str(f)] for d, r in rows.items() if method in r}
            for key, _ in FIGURES:
                getters = ((key, lambda c, k=key: c.get(k)), (f"{key}_as_sent", lambda c, k=key: _as_sent(c, k)))
                for name, get in getters:
                    vals = {d: v for d, c in cells.items() if (v := get(c)) is not None}
                    cell[name] = {"mean": sum(vals.values()) / len(vals) if vals else None,
                                  "worst": min(vals.values()) if vals else None,
                                  "worst_domain": min(vals, key=lambda d: vals[d]) if vals else None}
            calls = sum(c.get("calls", 0) for c in cells.values())
            over = sum(c.get("over_budget", 0) for c in cells.values())
            cell["over_budget_share"] = over / calls if calls else None
            ratios = [c["sent_per_budget"] for c in cells.values() if c.get("sent_per_budget") is not None]
            cell["sent_per_budget_mean"] = sum(ratios) / len(ratios) if ratios else None
            per[str(f)] = cell
        out[method] = per
    return out


def _cells(per: Mapping[str, Any], fractions: Sequence[float], get: Callable[[Mapping[str, Any]], str]) -> str:
    return " / ".join(get(per.get(str(f), {})) for f in fractions)


def domain_table(domain: str, steps: Mapping[str, int], rows: Mapping[str, Any], fractions: Sequence[float]) -> Table:
    fr = " / ".join(f"{100 * f:g}%" for f in fractions)
    table = Table(title=f"{domain}: {steps['steps']:,} steps ({steps['independent_steps']:,} with independent "
                        f"references, {steps['ours_steps']:,} with ours); cells: {fr}", title_justify="left")
    table.add_column("method", no_wrap=True)
    for _, short in FIGURES:
        table.add_column(short, justify="right", no_wrap=True)
    table.add_column("over budget", justify="right", no_wrap=True)
    table.add_column("sent /\nbudget", justify="right", no_wrap=True)
    for _, short in FIGURES:
        table.add_column(f"{short}\nas sent", justify="right", no_wrap=True)
    table.add_column("invalid", justify="right", no_wrap=True)
    for method, per in rows.items():
        table.add_row(
            method, *[_cells(per, fractions, lambda c, k=k: _f(c.get(k))) for k, _ in FIGURES],
            _cells(per, fractions, lambda c: f"{c['over_budget']:,}/{c['calls']:,}" if "calls" in c else "-"),
            _cells(per, fractions,
                   lambda c: "-" if c.get("sent_per_budget") is None else f"{c['sent_per_budget']:.2f}"),
            *[_cells(per, fractions, lambda c, k=k: _f(_as_sent(c, k))) for k, _ in FIGURES],
            _cells(per, fractions, lambda c: f"{c['invalid']:,}" if "invalid" in c else "-"))
    return table


def summary_table(summary: Mapping[str, Any], fractions: Sequence[float]) -> Table:
    fr = " / ".join(f"{100 * f:g}%" for f in fractions)
    table = Table(title=f"across data sets (micro recall per set; mean and worst over sets); cells: {fr}",
                  title_justify="left", caption="worst: the lowest set's recall (which set: middleware.json)",
                  caption_justify="left")
    table.add_column("method", no_wrap=True)
    for _, short in FIGURES:
        table.add_column(f"{short}\nmean", justify="right", no_wrap=True)
        table.add_column(f"{short}\nworst", justify="right", no_wrap=True)
    table.add_column("over\nbudget", justify="right", no_wrap=True)
    table.add_column("sent /\nbudget", justify="right", no_wrap=True)
    for _, short in FIGURES:
        table.add_column(f"{short} as sent\nmean", justify="right", no_wrap=True)
        table.add_column(f"{short} as sent\nworst", justify="right", no_wrap=True)

    def mean(c: Mapping[str, Any], k: str) -> str:
        return _f(c[k]["mean"])

    def worst(c: Mapping[str, Any], k: str) -> str:
        return _f(c[k]["worst"])

    for method, per in summary.items():
        cells = []
        for key, _ in FIGURES:
            cells += [_cells(per, fractions, lambda c, k=key: mean(c, k)),
                      _cells(per, fractions, lambda c, k=key: worst(c, k))]
        cells.append(_cells(per, fractions, lambda c: "-" if c["over_budget_share"] is None
                            else f"{100 * c['over_budget_share']:.0f}%"))
        cells.append(_cells(per, fractions, lambda c: "-" if c["sent_per_budget_mean"] is None
                            else f"{c['sent_per_budget_mean']:.2f}"))
        for key, _ in FIGURES:
            cells += [_cells(per, fractions, lambda c, k=f"{key}_as_sent": mean(c, k)),
                      _cells(per, fractions, lambda c, k=f"{key}_as_sent": worst(c, k))]
        table.add_row(method, *cells)
    return table


def main(argv: Sequence[str] | None = None) -> int:
    from bench_unseen import DOMAINS, train_lodo  # the leave-one-out scorers, cached by bench_unseen's own key

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--domains", default=",".join(DOMAINS), help="comma-separated (default: all five)")
    parser.add_argument("--fractions", default="0.1,0.25", help="shares of the non-system tokens (default 0.1,0.25)")
    parser.add_argument("--max-steps", type=int, default=6, help="steps per transcript, evenly spread (0: all)")
    parser.add_argument("--no-lodo", action="store_true", help="leave out the leave-one-data-set-out scorer rows")
    parser.add_argument("--out", type=Path, default=OUT / "middleware.json")
    args = parser.parse_args(argv)
    domains = [d.strip() for d in args.domains.split(",") if d.strip()]
    unknown = [d for d in domains if d not in DOMAINS]
    if unknown:
        parser.error(f"unknown domain {unknown[0]!r}; expected some of {', '.join(DOMAINS)}")
    fractions = tuple(float(x) for x in args.fractions.split(","))
    max_steps = args.max_steps or None
    started = time.perf_counter()
    bundled = default_scorer()
    rows: dict[str, dict[str, Any]] = {}
    steps: dict[str, dict[str, int]] = {}
    lodo_info: dict[str, Any] = {}
    timings: dict[str, Any] = {}
    for d in domains:
        bundled_compactor = Compactor(scorer=bundled, counter=TEXT_TOKENS)
        methods: dict[str, Selector] = {DEFAULT_ROW: salience_selector(bundled_compactor)}
        if not args.no_lodo:
            scorer, lodo_info[d] = train_lodo(d, args.data, False)
            methods[LODO_ROW] = salience_selector(Compactor(scorer=scorer, counter=TEXT_TOKENS))
        methods.update({CLEAR_DEFAULT: clear_tool_uses_selector(keep=3, fit=False),
                        CLEAR_FIT: clear_tool_uses_selector(keep=0, fit=True),
                        SUMMARY: summarization_selector(), WINDOW: window_selector})
        transcripts = load_transcripts(args.data / d)
        t0 = time.perf_counter()
        report: dict[str, Any] = {"results": []}
        recorders: dict[str, Recorder] = {}
        for f in fractions:  # one run per fraction, so that each recorder sees one budget share
            rec = {name: Recorder(sel) for name, sel in methods.items()}
            part = evaluate(transcripts, rec, [f], max_steps=max_steps, reference=WINDOW, progress=True,
                            description=f"[{d}] {100 * f:g}%: within budget").to_dict()
            report = {**part, "results": report["results"] + part["results"]}
            recorders.update({f"{name}@{f}": r for name, r in rec.items()})
        rows[d] = domain_rows(report, recorders)
        for f in fractions:  # as sent: the budget check off, each selector at the step's real budget
            sent = {name: uncapped(methods[name], f) for name in AS_SENT}
            sent[SAME_TOKENS] = uncapped(same_tokens_selector(bundled_compactor, methods[CLEAR_DEFAULT]), f)
            add_as_sent(rows[d], evaluate(transcripts, sent, [f], counter=_nothing, max_steps=max_steps,
                                          reference=None, progress=True,
                                          description=f"[{d}] {100 * f:g}%: as sent").to_dict())
        timings[d] = round(time.perf_counter() - t0, 1)
        steps[d] = {"steps": report["steps"], "transcripts": report["meta"]["transcripts"],
                    "independent_steps": report["meta"]["independent_steps"],
                    "ours_steps": report["meta"]["ours_steps"]}
        note(f"[{d}] {report['steps']:,} steps in {timings[d]} s")
        console.print(domain_table(d, steps[d], rows[d], fractions))
    summary = summarise(rows, fractions)
    console.print(summary_table(summary, fractions))
    import langchain

    out = {
        "command": " ".join(["python", "benchmarks/bench_middleware.py",
                             *(argv if argv is not None else sys.argv[1:])]),
        "salience_version": salience.__version__, "langchain_version": langchain.__version__,
        "python": platform.python_version(),
        "args": {"data": str(args.data), "domains": domains, "fractions": list(fractions), "max_steps": max_steps,
                 "lodo": not args.no_lodo},
        "units": "cl100k text tokens, no per-message overhead (every method counts the same way)",
        "recall": "micro; an output over the budget or a BudgetError scores nothing at that step",
        "methods": {k: v for k, v in DESCRIPTIONS.items() if args.no_lodo is False or k != LODO_ROW},
        "lodo": lodo_info, "steps": steps, "timings": {**timings, "total": round(time.perf_counter() - started, 1)},
        "domains": rows, "summary": summary,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1, default=str) + "\n", encoding="utf-8")
    note(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
