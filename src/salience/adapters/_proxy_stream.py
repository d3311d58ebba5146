"""Server-sent event streams of the three endpoints, for the restore tool on streaming requests.

A streaming request that gets the restore tool (``salience proxy --restore-tool``) is read
from the upstream to its end before the client sees any of it, because only the whole
turn says whether the model called the tool:

* :func:`parse` splits an SSE body into ``(event, data)`` pairs;
* :func:`accumulate` folds a turn's events into the answer the endpoint gives without
  streaming (Chat Completions ``chat.completion``, Anthropic ``message``, Responses
  ``response``), so :mod:`salience.adapters._proxy_restore` reads its calls as it reads a
  plain answer; ``None`` when the stream is not one it knows;
* :func:`render` writes an answer back as the endpoint's event stream: used only when the
  proxy changed the last turn (restore calls taken out). A last turn left unchanged is
  sent as the upstream's own bytes.

All functions here are pure.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["accumulate", "parse", "render"]


def parse(data: bytes) -> list[tuple[str | None, str]]:
    """``(event name or None, data)`` of each event of an SSE body (comments and ids left out)."""
    out: list[tuple[str | None, str]] = []
    text = data.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n")
    for block in text.split("\n\n"):
        event: str | None = None
        lines: list[str] = []
        for line in block.split("\n"):
            if line.startswith(":") or not line:
                continue
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "event":
                event = value
            elif field == "data":
                lines.append(value)
        if lines:
            out.append((event, "\n".join(lines)))
    return out


def _json_events(events: list[tuple[str | None, str]]) -> list[dict[str, Any]] | None:
    out = []
    for _, data in events:
        if data.strip() == "[DONE]":
            continue
        try:
            value = json.loads(data)
        except ValueError:
            return None
        if isinstance(value, dict):
            out.append(value)
    return out


def accumulate(endpoint: str, events: list[tuple[str | None, str]]) -> dict[str, Any] | None:
    """The non-streaming answer that ``events`` (one turn of ``endpoint``'s stream) add up to."""
    chunks = _json_events(events)
    if not chunks:
        return None
    try:
        if endpoint == "chat":
            return _chat(chunks)
        if endpoint == "messages":
            return _messages(chunks)
        return _responses(chunks)
    except (KeyError, IndexError, TypeError, AttributeError, ValueError):
        return None


def _chat(chunks: list[dict[str, Any]]) -> dict[str, Any] | None:
    text: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    finish = None
    head = chunks[0]
    for chunk in chunks:
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            if isinstance(delta.get("content"), str):
                text.append(delta["content"])
            for call in delta.get("tool_calls") or []:
                slot = calls.setdefault(int(call.get("index", len(calls))),
                                        {"id": None, "type": "function", "function": {"name": "", "arguments": ""}})
                if call.get("id"):
                    slot["id"] = call["id"]
                function = call.get("function") or {}
                slot["function"]["name"] += function.get("name") or ""
                slot["function"]["arguments"] += function.get("arguments") or ""
            finish = choice.get("finish_reason") or finish
    message: dict[str, Any] = {"role": "assistant", "content": "".join(text) if text else None}
    if calls:
        message["tool_calls"] = [calls[k] for k in sorted(calls)]
    return {"id": head.get("id"), "object": "chat.completion", "created": head.get("created", 0),
            "model": head.get("model"), "choices": [{"index": 0, "message": message, "finish_reason": finish}]}


def _messages(chunks: list[dict[str, Any]]) -> dict[str, Any] | None:
    message: dict[str, Any] | None = None
    partial: dict[int, str] = {}
    for event in chunks:
        kind = event.get("type")
        if kind == "message_start":
            message = {**event["message"], "content": list(event["message"].get("content") or [])}
        elif message is None:
            continue
        elif kind == "content_block_start":
            index = int(event["index"])
            while len(message["content"]) <= index:
                message["content"].append(None)
            message["content"][index] = dict(event["content_block"])
        elif kind == "content_block_delta":
            block, delta = message["content"][int(event["index"])], event["delta"]
            if delta.get("type") == "text_delta":
                block["text"] = block.get("text", "") + delta["text"]
            elif delta.get("type") == "input_json_delta":
                partial[int(event["index"])] = partial.get(int(event["index"]), "") + delta["partial_json"]
            elif delta.get("type") == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + delta["thinking"]
            elif delta.get("type") == "signature_delta":
                block["signature"] = block.get("signature", "") + delta["signature"]
        elif kind == "content_block_stop":
            index = int(event["index"])
            if index in partial:
                message["content"][index]["input"] = json.loads(partial.pop(index) or "{}")
        elif kind == "message_delta":
            message.update({k: v for k, v in (event.get("delta") or {}).items()})
            if isinstance(event.get("usage"), dict):
                message["usage"] = {**(message.get("usage") or {}), **event["usage"]}
    if message is None:
        return None
    message["content"] = [b for b in message["content"] if b is not None]
    return message


def _responses(chunks: list[dict[str, Any]]) -> dict[str, Any] | None:
    for event in reversed(chunks):
        if event.get("type") in ("response.completed", "response.incomplete") and isinstance(
                event.get("response"), dict):
            return dict(event["response"])
    return None


# -- writing an answer back as a stream -----------------------------------------------------------


def _event(data: Any, name: str | None = None) -> bytes:
    head = f"event: {name}\n" if name else ""
    return (head + "data: " + json.dumps(data, ensure_ascii=False) + "\n\n").encode()


def render(endpoint: str, answer: dict[str, Any]) -> bytes:
    """``answer`` (the endpoint's non-streaming shape) as the endpoint's event stream."""
    if endpoint == "chat":
        return _render_chat(answer)
    if endpoint == "messages":
        return _render_messages(answer)
    return _render_responses(answer)


def _render_chat(answer: dict[str, Any]) -> bytes:
    choice = answer["choices"][0]
    message = choice.get("message") or {}
    base = {"id": answer.get("id"), "object": "chat.completion.chunk", "created": answer.get("created", 0),
            "model": answer.get("model")}

    def chunk(delta: dict[str, Any], finish: Any = None) -> bytes:
        return _event({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    out = [chunk({"role": "assistant", "content": ""})]
    if message.get("content"):
        out.append(chunk({"content": message["content"]}))
    for k, call in enumerate(message.get("tool_calls") or []):
        out.append(chunk({"tool_calls": [{"index": k, "id": call.get("id"), "type": "function",
                                          "function": dict(call.get("function") or {})}]}))
    out.append(chunk({}, choice.get("finish_reason") or "stop"))
    out.append(b"data: [DONE]\n\n")
    return b"".join(out)


def _render_messages(answer: dict[str, Any]) -> bytes:
    blocks = list(answer.get("content") or [])
    start = {**answer, "content": [], "stop_reason": None, "stop_sequence": None}
    out = [_event({"type": "message_start", "message": start}, "message_start")]
    for i, block in enumerate(blocks):
        kind = block.get("type")
        if kind == "text":
            skeleton, deltas = {**block, "text": ""}, [{"type": "text_delta", "text": block.get("text", "")}]
        elif kind == "tool_use":
            skeleton = {**block, "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": json.dumps(block.get("input", {}),
                                                                              ensure_ascii=False)}]
        elif kind == "thinking":
            skeleton = {**block, "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": block.get("thinking", "")},
                      {"type": "signature_delta", "signature": block.get("signature", "")}]
        else:
            skeleton, deltas = block, []
        out.append(_event({"type": "content_block_start", "index": i, "content_block": skeleton},
                          "content_block_start"))
        out.extend(_event({"type": "content_block_delta", "index": i, "delta": d}, "content_block_delta")
                   for d in deltas)
        out.append(_event({"type": "content_block_stop", "index": i}, "content_block_stop"))
    usage = answer.get("usage") or {}
    out.append(_event({"type": "message_delta", "delta": {"stop_reason": answer.get("stop_reason"),
                                                          "stop_sequence": answer.get("stop_sequence")},
                       "usage": {"output_tokens": usage.get("output_tokens", 0)}}, "message_delta"))
    out.append(_event({"type": "message_stop"}, "message_stop"))
    return b"".join(out)


def _render_responses(answer: dict[str, Any]) -> bytes:
    n = 0

    def event(data: dict[str, Any]) -> bytes:
        nonlocal n
        n += 1
        return _event({**data, "sequence_number": n - 1}, data["type"])

    out = [event({"type": "response.created", "response": {**answer, "status": "in_progress", "output": []}})]
    for i, item in enumerate(answer.get("output") or []):
        out.append(event({"type": "response.output_item.added", "output_index": i, "item": item}))
        out.append(event({"type": "response.output_item.done", "output_index": i, "item": item}))
    out.append(event({"type": "response.completed", "response": answer}))
    return b"".join(out)
