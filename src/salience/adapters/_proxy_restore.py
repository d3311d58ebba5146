"""The proxy's restore tool (``salience proxy --restore-tool``): the definition added to each
request, and the model's restore calls answered inside the proxy.

What is supported, precisely:

* **Added**: to every request that is compacted, streaming or not, in the endpoint's own
  format (Chat Completions function tool, Responses function tool, Anthropic tool),
  after the client's own tools (so the cached prefix of the tool list stays put); not
  when a tool of that name is there already, and not when ``tool_choice`` is ``"none"``
  (OpenAI) or ``{"type": "none"}`` (Anthropic).
* **Answered**: when the upstream's answer (status 200) calls only the restore tool, the
  proxy answers each call from the compaction of that request
  (:meth:`~salience.selector.restore.RestoreTool.answer`: the archived entries, exactly)
  and sends the request again, up to ``ProxyConfig.restore_rounds`` times; the client gets
  the last answer.
* **The follow-up counts the restored text**: when the model's restore turn and the
  answers fit the budget after the request as sent, they are appended to it (the cached
  prefix stays); otherwise the follow-up is the client's history with the exchange,
  compacted afresh to the same budget (not through the conversation's session, which the
  client's next request, without the exchange, would otherwise reset), so its prefix may
  differ from the first request's. The rest makes room for the exchange; when the
  compacted follow-up would not hold the exchange whole (the restored text and the floor
  alone are over the budget), or the history cannot be compacted with it (a
  ``SalienceError``, such as client ids that collide with the new messages' positional
  ones), the follow-up is sent appended, over the budget, rather than lose the restore.
* **Streaming requests**: the upstream's stream is read to its end each round (the whole
  turn says whether the model called the tool; :mod:`salience.adapters._proxy_stream`
  folds its events into the plain answer), so the client gets no event before the last
  round has finished: the price of the tool on a stream. The last round's stream is
  sent as the upstream's own bytes, or, when restore calls had to be taken out of it,
  written anew from the folded answer. Without ``--restore-tool`` streams pass through
  as they come.
* **Mixed turns**: when the answer calls the client's tools as well, the restore calls
  are taken out of it (the client cannot answer them, and the proxy cannot send a turn
  with the client's calls unanswered); so they are when the rounds run out. A turn left
  with nothing is given a one-line text saying so.
* **Not kept**: the restore exchange happens between the proxy and the upstream; the
  client's history never holds it, so a later request does not carry the restored text.

All functions here are pure: they return new objects and never change their arguments.
"""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["add_tool", "follow_up", "restore_calls", "strip_calls", "wants_tool"]

_FORMATS = {"chat": "openai", "responses": "responses", "messages": "anthropic"}
#: What a turn whose only calls were taken out says.
EMPTY = "[salience: the model asked to restore archived context; the proxy could not answer it in this turn]"


def _tool_name(endpoint: str, tool: Any) -> Any:
    if not isinstance(tool, dict):
        return None
    if endpoint == "chat":
        function = tool.get("function")
        return function.get("name") if isinstance(function, dict) else None
    return tool.get("name")


def wants_tool(endpoint: str, body: dict[str, Any]) -> bool:
    """Whether the restore tool may be added to ``body``: tools not turned off."""
    choice = body.get("tool_choice")
    if endpoint == "messages":
        return not (isinstance(choice, dict) and choice.get("type") == "none")
    return choice != "none"


def add_tool(endpoint: str, body: dict[str, Any], restore: Any) -> dict[str, Any]:
    """``body`` with the restore tool's definition after its own ``tools`` (unchanged when
    it has one of that name, or ``tools`` is not a list)."""
    tools = body.get("tools", [])
    if not isinstance(tools, list) or any(_tool_name(endpoint, t) == restore.name for t in tools):
        return body
    return {**body, "tools": [*tools, restore.definition(_FORMATS[endpoint])]}


def _calls(endpoint: str, answer: Any) -> list[tuple[Any, Any, Any]]:
    """``(call id, tool name, arguments)`` of every tool call in the upstream's ``answer``."""
    out: list[tuple[Any, Any, Any]] = []
    if not isinstance(answer, dict):
        return out
    if endpoint == "chat":
        choices = answer.get("choices")
        message = choices[0].get("message") if isinstance(choices, list) and choices and isinstance(
            choices[0], dict) else None
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        for call in calls if isinstance(calls, list) else []:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict):
                out.append((call.get("id"), function.get("name"), function.get("arguments")))
    elif endpoint == "responses":
        items = answer.get("output")
        for item in items if isinstance(items, list) else []:
            if isinstance(item, dict) and item.get("type") == "function_call":
                out.append((item.get("call_id"), item.get("name"), item.get("arguments")))
    else:
        blocks = answer.get("content")
        for block in blocks if isinstance(blocks, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                out.append((block.get("id"), block.get("name"), block.get("input")))
    return out


def restore_calls(endpoint: str, answer: Any, restore: Any) -> tuple[list[tuple[str, Any]], int]:
    """(``(call id, arguments)`` of the answer's restore calls, how many other calls it makes)."""
    calls = _calls(endpoint, answer)
    mine = [(cid, args) for cid, name, args in calls if restore.is_call(name) and isinstance(cid, str) and cid]
    return mine, len(calls) - len(mine)


def follow_up(endpoint: str, sent: dict[str, Any], answer: dict[str, Any],
              answers: list[tuple[str, str]]) -> dict[str, Any]:
    """The request ``sent`` again, with the model's turn from ``answer`` and the restore
    ``answers`` (``(call id, text)``) after its history."""
    if endpoint == "chat":
        message = answer["choices"][0]["message"]
        turn: dict[str, Any] = {"role": "assistant", "content": message.get("content"),
                                "tool_calls": copy.deepcopy(message["tool_calls"])}
        results = [{"role": "tool", "tool_call_id": cid, "content": text} for cid, text in answers]
        return {**sent, "messages": [*sent["messages"], turn, *results]}
    if endpoint == "responses":
        keep = ("reasoning", "function_call", "message")
        turn_items = [copy.deepcopy(x) for x in answer.get("output", []) if isinstance(x, dict)
                      and x.get("type") in keep]
        outputs = [{"type": "function_call_output", "call_id": cid, "output": text} for cid, text in answers]
        return {**sent, "input": [*sent["input"], *turn_items, *outputs]}
    turn = {"role": "assistant", "content": copy.deepcopy(answer["content"])}
    results = [{"type": "tool_result", "tool_use_id": cid, "content": text} for cid, text in answers]
    return {**sent, "messages": [*sent["messages"], turn, {"role": "user", "content": results}]}


def strip_calls(endpoint: str, answer: dict[str, Any], restore: Any) -> dict[str, Any]:
    """``answer`` without its restore calls (see the module doc, "Mixed turns")."""
    out = copy.deepcopy(answer)
    if endpoint == "chat":
        message = out["choices"][0]["message"]
        calls = [c for c in message.get("tool_calls") or [] if not restore.is_call(c.get("function", {}).get("name"))]
        if calls:
            message["tool_calls"] = calls
        else:
            message.pop("tool_calls", None)
            message["content"] = message.get("content") or EMPTY
            out["choices"][0]["finish_reason"] = "stop"
    elif endpoint == "responses":
        items = [x for x in out.get("output", []) if not (isinstance(x, dict) and x.get("type") == "function_call"
                                                           and restore.is_call(x.get("name")))]
        if not any(isinstance(x, dict) and x.get("type") in ("message", "function_call") for x in items):
            items = [x for x in items if not (isinstance(x, dict) and x.get("type") == "reasoning")]
            items.append({"type": "message", "id": "msg_salience", "role": "assistant", "status": "completed",
                          "content": [{"type": "output_text", "text": EMPTY, "annotations": []}]})
        out["output"] = items
    else:
        blocks = [b for b in out.get("content", []) if not (isinstance(b, dict) and b.get("type") == "tool_use"
                                                             and restore.is_call(b.get("name")))]
        if not any(isinstance(b, dict) and b.get("type") == "tool_use" for b in blocks):
            out["stop_reason"] = "end_turn"
        if not any(isinstance(b, dict) and b.get("type") in ("text", "tool_use") for b in blocks):
            blocks.append({"type": "text", "text": EMPTY})
        out["content"] = blocks
    return out
