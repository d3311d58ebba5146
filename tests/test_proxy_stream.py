"""The proxy's SSE helpers (salience.adapters._proxy_stream): parse, fold a turn, write it back."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("starlette")

from salience.adapters._proxy_stream import accumulate, parse, render  # noqa: E402

CHAT = {"id": "c1", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": "Let me look.", "tool_calls": [
                {"id": "a", "type": "function",
                 "function": {"name": "salience_restore", "arguments": '{"ids": ["m3"]}'}},
                {"id": "b", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]}}]}
MESSAGE = {"id": "msg_1", "type": "message", "role": "assistant", "model": "m", "stop_reason": "tool_use",
           "stop_sequence": None, "usage": {"input_tokens": 3, "output_tokens": 5},
           "content": [{"type": "thinking", "thinking": "hmm", "signature": "sig"},
                       {"type": "text", "text": "Let me look."},
                       {"type": "tool_use", "id": "t1", "name": "salience_restore", "input": {"ids": ["m3"]}}]}
RESPONSE = {"id": "resp_1", "object": "response", "created_at": 0, "model": "m", "status": "completed",
            "output": [{"type": "function_call", "id": "fc", "call_id": "r1", "name": "salience_restore",
                        "arguments": '{"ids": ["m3"]}', "status": "completed"}]}


def test_parse_reads_names_multiline_data_crlf_and_skips_comments():
    raw = b": keep-alive\r\n\r\nevent: a\r\ndata: {\"x\":\r\ndata: 1}\r\n\r\ndata: [DONE]\n\n"
    assert parse(raw) == [("a", '{"x":\n1}'), (None, "[DONE]")]
    assert json.loads(parse(raw)[0][1]) == {"x": 1}


@pytest.mark.parametrize("endpoint, answer", [("chat", CHAT), ("messages", MESSAGE), ("responses", RESPONSE)],
                         ids=["chat", "messages", "responses"])
def test_render_then_accumulate_gives_the_answer_back(endpoint, answer):
    assert accumulate(endpoint, parse(render(endpoint, answer))) == answer


def test_chat_arguments_in_pieces_are_joined_by_index():
    def chunk(delta, finish=None):
        return "data: " + json.dumps({"id": "c", "created": 0, "model": "m", "choices": [
            {"index": 0, "delta": delta, "finish_reason": finish}]}) + "\n\n"

    raw = (chunk({"role": "assistant"}) + chunk({"tool_calls": [{"index": 0, "id": "a", "function": {
        "name": "salience_restore", "arguments": '{"id'}}]}) + chunk({"tool_calls": [{"index": 0, "function": {
            "arguments": 's": ["m1"]}'}}]}) + chunk({}, "tool_calls") + "data: [DONE]\n\n").encode()
    message = accumulate("chat", parse(raw))["choices"][0]["message"]
    assert message["content"] is None
    assert message["tool_calls"] == [{"id": "a", "type": "function",
                                      "function": {"name": "salience_restore", "arguments": '{"ids": ["m1"]}'}}]


@pytest.mark.parametrize("raw", [b"", b"data: not json\n\n", b"event: ping\ndata: {}\n\n"],
                         ids=["empty", "not-json", "no-turn"])
def test_streams_it_does_not_know_fold_to_none(raw):
    assert accumulate("messages", parse(raw)) is None
    assert accumulate("responses", parse(raw)) is None
