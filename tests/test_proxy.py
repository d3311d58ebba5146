"""``salience proxy`` with the real ``openai`` and ``anthropic`` SDK clients and a fake upstream on 127.0.0.1.

Both servers run under uvicorn in threads on free ports; each stops when its test ends and
in any case after ``LIFETIME`` seconds or ``MAX_REQUESTS`` requests.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

import httpx  # noqa: E402
import uvicorn  # noqa: E402
from starlette.applications import Starlette  # noqa: E402
from starlette.requests import Request  # noqa: E402
from starlette.responses import JSONResponse, Response, StreamingResponse  # noqa: E402
from starlette.routing import Route  # noqa: E402

from salience import Compactor  # noqa: E402
from salience.adapters.proxy import ProxyConfig, build_app, parse_budget  # noqa: E402
from salience.errors import ParameterError  # noqa: E402
from salience.messages.responses import check_responses, from_responses  # noqa: E402
from salience.messages.validate import check_anthropic, check_openai  # noqa: E402
from salience.selector.render import marker_ids  # noqa: E402
from salience.transcript import Transcript  # noqa: E402

BUDGET = 500
LIFETIME = 90.0
MAX_REQUESTS = 200
SECRET = "sk-test-secret-123"


class Flat:
    def score(self, transcript, query=None):
        return [0.5] * len(transcript.entries)


def words(text: str) -> int:
    return len(text.split())


def log_text(key: str) -> str:
    return "\n".join(f"record {key} line {i}: value {key}-{i * 13} ok" for i in range(40))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Served:
    """An ASGI app under uvicorn in a thread on a free port; stops by itself after ``LIFETIME``."""

    def __init__(self, app: Any) -> None:
        self.port = free_port()
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning",
                                                    access_log=False, lifespan="on"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.timer = threading.Timer(LIFETIME, self.stop)
        self.timer.daemon = True

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> Served:
        self.thread.start()
        self.timer.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the test server did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self.server.should_exit = True

    def __exit__(self, *exc: Any) -> None:
        self.stop()
        self.timer.cancel()
        self.thread.join(timeout=10)


class Upstream:
    """A fake OpenAI + Anthropic API that records what it receives."""

    def __init__(self) -> None:
        self.received: list[tuple[str, dict[str, str], Any]] = []
        self.app = Starlette(routes=[
            Route("/v1/chat/completions", self.chat, methods=["POST"]),
            Route("/v1/responses", self.responses, methods=["POST"]),
            Route("/v1/messages", self.messages, methods=["POST"]),
            Route("/v1/models", self.models, methods=["GET"]),
        ])

    async def _record(self, request: Request) -> Any:
        body = json.loads(await request.body())
        self.received.append((request.url.path, dict(request.headers), body))
        if len(self.received) > MAX_REQUESTS:
            raise RuntimeError("the fake upstream got more requests than a test makes")
        return body

    async def models(self, request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": "gpt-4o", "object": "model", "created": 0,
                                                          "owned_by": "test"}]})

    async def chat(self, request: Request) -> Response:
        body = await self._record(request)
        if body.get("model") == "missing-model":
            return JSONResponse({"error": {"message": "The model does not exist", "type": "invalid_request_error",
                                           "param": "model", "code": "model_not_found"}}, status_code=404)
        if body.get("stream"):
            def chunks() -> Iterator[bytes]:
                for i, text in enumerate(["Hello", " world"]):
                    chunk = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": body["model"],
                             "choices": [{"index": 0, "delta": {"role": "assistant", "content": text} if i == 0
                                          else {"content": text}, "finish_reason": None}]}
                    yield f"data: {json.dumps(chunk)}\n\n".encode()
                yield b"data: [DONE]\n\n"

            return StreamingResponse(chunks(), media_type="text/event-stream")
        return JSONResponse({"id": "c1", "object": "chat.completion", "created": 0, "model": body["model"],
                             "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello world"},
                                          "finish_reason": "stop"}],
                             "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}})

    async def responses(self, request: Request) -> Response:
        body = await self._record(request)
        return JSONResponse({"id": "resp_1", "object": "response", "created_at": 0, "model": body["model"],
                             "status": "completed", "parallel_tool_calls": True, "tool_choice": "auto",
                             "tools": [], "output": [{"type": "message", "id": "msg_1", "role": "assistant",
                                                      "status": "completed", "content": [
                                                          {"type": "output_text", "text": "Hello world",
                                                           "annotations": []}]}]})

    async def messages(self, request: Request) -> Response:
        body = await self._record(request)
        message = {"id": "msg_1", "type": "message", "role": "assistant", "model": body["model"],
                   "content": [{"type": "text", "text": "Hello world"}], "stop_reason": "end_turn",
                   "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 2}}
        if body.get("stream"):
            def events() -> Iterator[bytes]:
                start = {**message, "content": [], "stop_reason": None}
                for name, data in [
                    ("message_start", {"type": "message_start", "message": start}),
                    ("content_block_start", {"type": "content_block_start", "index": 0,
                                             "content_block": {"type": "text", "text": ""}}),
                    ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                             "delta": {"type": "text_delta", "text": "Hello"}}),
                    ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                             "delta": {"type": "text_delta", "text": " world"}}),
                    ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                    ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn",
                                                                           "stop_sequence": None},
                                       "usage": {"output_tokens": 2}}),
                    ("message_stop", {"type": "message_stop"}),
                ]:
                    yield f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()

            return StreamingResponse(events(), media_type="text/event-stream")
        return JSONResponse(message)


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[Upstream, Served, Any]]:
    upstream = Upstream()
    compactor = Compactor(scorer=Flat(), budget=BUDGET, counter=words, pin_last=2, max_entry_tokens=None)
    with Served(upstream.app) as up:
        app = build_app(ProxyConfig(upstream=up.url, compactor=compactor, timeout=30))
        with Served(app) as proxy:
            yield upstream, proxy, app


def openai_history(n: int = 8) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "system", "content": "You are a booking agent."},
                                 {"role": "user", "content": "Check my trips."}]
    for i in range(n):
        out.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": "lookup", "arguments": json.dumps({"k": i})}}]})
        out.append({"role": "tool", "tool_call_id": f"c{i}", "content": log_text(f"K{i}")})
    out.append({"role": "user", "content": "Which one is delayed?"})
    return out


def anthropic_history(n: int = 8) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "user", "content": "Check my trips."}]
    for i in range(n):
        out.append({"role": "assistant", "content": [{"type": "tool_use", "id": f"t{i}", "name": "lookup",
                                                      "input": {"k": i}}]})
        out.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}",
                                                 "content": log_text(f"K{i}")}]})
    out[-1]["content"].append({"type": "text", "text": "Which one is delayed?"})
    return out


def tokens(transcript: Transcript) -> int:
    return sum(words(e.text) for e in transcript.entries)


def last(upstream: Upstream, path: str) -> tuple[dict[str, str], Any]:
    found = [(h, b) for p, h, b in upstream.received if p == path]
    assert found, f"the upstream got no request on {path}"
    return found[-1]


def openai_client(proxy: Served, **kw: Any) -> Any:
    return openai.OpenAI(base_url=proxy.url + "/v1", api_key=SECRET, max_retries=0, timeout=30, **kw)


def anthropic_client(proxy: Served) -> Any:
    return anthropic.Anthropic(base_url=proxy.url, api_key=SECRET, max_retries=0, timeout=30)


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_openai_chat(servers, stream, caplog):
    upstream, proxy, _ = servers
    history = openai_history()
    caplog.set_level(logging.DEBUG, logger="salience.proxy")
    client = openai_client(proxy)
    if stream:
        chunks = client.chat.completions.create(model="gpt-4o", messages=history, stream=True)
        text = "".join(c.choices[0].delta.content or "" for c in chunks)
    else:
        text = client.chat.completions.create(model="gpt-4o", messages=history).choices[0].message.content
    assert text == "Hello world"
    headers, body = last(upstream, "/v1/chat/completions")
    assert headers["authorization"] == f"Bearer {SECRET}"
    assert body["stream"] is stream if stream else "stream" not in body
    assert "tools" not in body  # no restore tool without restore_tool=True
    sent = body["messages"]
    assert check_openai(sent) == []
    assert tokens(Transcript.from_openai(sent)) <= BUDGET < tokens(Transcript.from_openai(history))
    assert sent[0] == history[0] and sent[-1] == history[-1]
    assert SECRET not in caplog.text and "record K" not in caplog.text and "booking agent" not in caplog.text


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_anthropic_messages(servers, stream):
    upstream, proxy, _ = servers
    history = anthropic_history()
    client = anthropic_client(proxy)
    if stream:
        with client.messages.stream(model="claude-sonnet-4-5", max_tokens=64, system="You are a booking agent.",
                                    messages=history) as s:
            text = "".join(s.text_stream)
    else:
        reply = client.messages.create(model="claude-sonnet-4-5", max_tokens=64, system="You are a booking agent.",
                                       messages=history)
        text = reply.content[0].text
    assert text == "Hello world"
    headers, body = last(upstream, "/v1/messages")
    assert SECRET in (headers.get("x-api-key"), headers.get("authorization", "").removeprefix("Bearer "))
    assert "anthropic-version" in headers
    assert check_anthropic(body["messages"], system=body.get("system")) == []
    sent = Transcript.from_anthropic(body["messages"], system=body.get("system"))
    assert tokens(sent) <= BUDGET < tokens(Transcript.from_anthropic(history, system="You are a booking agent."))
    assert body["system"] == "You are a booking agent."


def _trip_items() -> list[dict[str, Any]]:
    """Responses input items: eight lookups with long outputs between two user turns."""
    items: list[dict[str, Any]] = [{"role": "user", "content": "Check my trips."}]
    for i in range(8):
        items += [{"type": "function_call", "call_id": f"c{i}", "name": "lookup", "arguments": json.dumps({"k": i})},
                  {"type": "function_call_output", "call_id": f"c{i}", "output": log_text(f"K{i}")}]
    items.append({"role": "user", "content": "Which one is delayed?"})
    return items


def test_openai_responses(servers):
    upstream, proxy, _ = servers
    items = _trip_items()
    reply = openai_client(proxy).responses.create(model="gpt-4o", instructions="You are a booking agent.",
                                                  input=items)
    assert reply.output_text == "Hello world"
    _, body = last(upstream, "/v1/responses")
    assert check_responses(body["input"]) == []
    assert tokens(from_responses(body["input"])) + words(body["instructions"]) <= BUDGET
    assert body["instructions"] == "You are a booking agent."
    assert tokens(from_responses(items)) > BUDGET


def test_budget_header_and_metrics(servers):
    upstream, proxy, _ = servers
    client = openai_client(proxy, default_headers={"x-salience-budget": "300", "x-salience-conversation": "conv-1"})
    client.chat.completions.create(model="gpt-4o", messages=openai_history())
    headers, body = last(upstream, "/v1/chat/completions")
    assert tokens(Transcript.from_openai(body["messages"])) <= 300
    assert not any(k.startswith("x-salience") for k in headers)
    metrics = httpx.get(proxy.url + "/metrics", timeout=10).json()
    chat = metrics["chat"]
    assert chat["requests"] >= 1 and chat["tokens_in"] > chat["tokens_out"] > 0
    assert chat["latency_ms_p50"] > 0 and chat["latency_ms_p99"] >= chat["latency_ms_p50"]


def test_upstream_errors_pass_through(servers):
    _, proxy, _ = servers
    with pytest.raises(openai.NotFoundError) as info:
        openai_client(proxy).chat.completions.create(model="missing-model", messages=openai_history(1))
    assert info.value.status_code == 404 and info.value.body["code"] == "model_not_found"
    # other paths are forwarded untouched
    assert [m.id for m in openai_client(proxy).models.list()] == ["gpt-4o"]


@pytest.mark.parametrize("path, body, param", [
    ("/v1/chat/completions", b"{not json", "body"),
    ("/v1/chat/completions", json.dumps({"model": "gpt-4o", "messages": "hi"}).encode(), "messages"),
    ("/v1/chat/completions", json.dumps({"model": "gpt-4o", "messages": [{"content": "x"}]}).encode(),
     "messages[0].role"),
    ("/v1/responses", json.dumps({"model": "gpt-4o", "input": 3}).encode(), "input"),
    ("/v1/messages", json.dumps({"model": "c", "messages": [{"role": "user", "content": "x"}],
                                 "system": 5}).encode(), "system"),
], ids=["not-json", "messages-not-list", "no-role", "input", "system"])
def test_malformed_bodies_get_a_400_naming_the_field(servers, path, body, param):
    upstream, proxy, _ = servers
    before = len(upstream.received)
    response = httpx.post(proxy.url + path, content=body, headers={"content-type": "application/json"}, timeout=10)
    assert response.status_code == 400
    error = response.json()["error"]
    assert param.split("[")[0].split(".")[0] in error["message"]
    if path != "/v1/messages":
        assert error["param"] == param
    assert len(upstream.received) == before  # never forwarded


def test_invalid_messages_get_a_400(servers):
    upstream, proxy, _ = servers
    before = len(upstream.received)
    bad = [{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "nope", "content": "x"}]
    response = httpx.post(proxy.url + "/v1/chat/completions", json={"model": "gpt-4o", "messages": bad}, timeout=10)
    assert response.status_code == 400 and "tool_call_id" in response.json()["error"]["message"]
    assert len(upstream.received) == before


def test_parse_budget():
    assert parse_budget("25%") == (None, 0.25) and parse_budget("1200") == (1200, None)
    with pytest.raises(ValueError, match="budget must be a positive number"):
        parse_budget("0")


@pytest.mark.parametrize("argv, code, text", [
    (["proxy", "--help"], 0, "usage: salience proxy"),
    (["proxy", "--upstream", "api.openai.com", "--scorer", "recency"], 2, "--upstream must be an http"),
    (["proxy", "--upstream", "http://127.0.0.1:9", "--budget", "0", "--scorer", "recency"], 2,
     "budget must be a positive number"),
    (["proxy", "--upstream", "http://127.0.0.1:9", "--port", "0", "--scorer", "recency"], 2, "--port must be"),
    (["proxy", "--upstream", "http://127.0.0.1:9", "--min-removal", "1.5", "--scorer", "recency"], 2,
     "min_removal must be a float in [0, 1)"),
    (["proxy", "--upstream", "http://127.0.0.1:9", "--restart-gain", "-1", "--scorer", "recency"], 2,
     "restart_gain must be a number >= 0 or None"),
    (["proxy", "--upstream", "http://127.0.0.1:9", "--cache-min", "-5", "--scorer", "recency"], 2,
     "cache_min must be an int >= 0"),
], ids=["help", "bad-upstream", "bad-budget", "bad-port", "bad-min-removal", "bad-restart-gain", "bad-cache-min"])
def test_command_line(argv, code, text, capsys):
    from salience.cli import main

    assert main(argv) == code
    captured = capsys.readouterr()
    assert text in captured.out + captured.err


# -- bad bodies, through the app in process (starlette's TestClient) to a recording fake upstream --------


class Recorder:
    """The network edge as an ``httpx.MockTransport`` handler: records each request, answers 200."""

    def __init__(self) -> None:
        self.bodies: list[Any] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.bodies.append(json.loads(request.content))
        assert len(self.bodies) < MAX_REQUESTS
        return httpx.Response(200, json={"id": "r1", "object": "chat.completion", "choices": []})


@pytest.fixture
def limited_proxy() -> Iterator[tuple[Any, Recorder]]:
    from starlette.testclient import TestClient

    from salience.limits import Limits

    recorder = Recorder()
    compactor = Compactor(scorer=Flat(), budget=BUDGET, counter=words, pin_last=2, max_entry_tokens=None)
    config = ProxyConfig(upstream="http://upstream.test", compactor=compactor, transport=httpx.MockTransport(recorder),
                         limits=Limits(max_depth=16, max_bytes=50_000, max_entries=30))
    with TestClient(build_app(config), raise_server_exceptions=False) as client:
        yield client, recorder


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


USER = '{"role": "user", "content": "hi"}'


@pytest.mark.parametrize("path, raw, status, text", [
    ("/v1/chat/completions", '{"model": "m", "messages": [' + USER + ', {"role": "user", "content": '
     + _deep(5_000) + '}]}', 400, "line 1, column 105: nested 17 deep, deeper than the limit max_depth=16"),
    ("/v1/messages", '{"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": '
     + _deep(40) + '}]}', 400, "nested 17 deep, deeper than the limit max_depth=16"),
    ("/v1/chat/completions", '{"model": "m", "messages": [{"role": "user", "content": "' + "x" * 60_000 + '"}]}',
     413, "request body (content-length): 60,061 bytes, more than the limit max_bytes=50,000"),
    ("/v1/chat/completions", '{"model": "m", "messages": [' + ", ".join([USER] * 31) + "]}", 400,
     "31 messages, more than the limit max_entries=30"),
    ("/v1/responses", '{"model": "m", "input": [' + ", ".join([USER] * 31) + "]}", 400,
     "31 items, more than the limit max_entries=30"),
    ("/v1/chat/completions", '{"model": "m", "messages": [{"role": "user", "content": "hi", "x": NaN}]}', 400,
     "line 1, column 68: NaN is not a JSON value"),
    ("/v1/chat/completions", '{"model": "m", "messages": [' + USER + ",]}", 400,
     "request body: not valid JSON: line 1, column 63: Expecting value"),
    ("/v1/chat/completions", '{"model": "m", "messages": [{"role": "user", "content": "\xff"}]}', 400,
     "request body: not UTF-8 text (at byte offset 57: invalid start byte)"),
    ("/v1/models/anything", "x" * 60_000, 413, "more than the limit max_bytes=50,000"),
], ids=["deep-chat", "deep-anthropic", "too-large", "too-many-messages", "too-many-items", "nan", "trailing-comma",
        "not-utf8", "passthrough-too-large"])
def test_bad_bodies_get_a_4xx_naming_where_and_are_not_forwarded(limited_proxy, path, raw, status, text):
    client, recorder = limited_proxy
    content = raw.encode("latin-1") if "\xff" in raw else raw.encode()
    response = client.post(path, content=content, headers={"content-type": "application/json"})
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert text in error["message"]
    assert recorder.bodies == []


CALL = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}


@pytest.mark.parametrize("path, body, text", [
    ("/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "go"},
                                                         {"role": "assistant", "content": None, "tool_calls": [CALL]},
                                                         {"role": "user", "content": "well?"}]},
     "message 1 (id 'm1', assistant): tool call 'c1' is not answered before message 2"),
    ("/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "go"},
                                                         {"role": "assistant", "content": None, "tool_calls": [CALL]}]},
     "the provider would refuse this history: message 1 (assistant): tool call 'c1' is not answered"),
    ("/v1/messages", {"model": "m", "max_tokens": 5, "messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
        {"role": "user", "content": [{"type": "text", "text": "well?"}]}]}, "'t1'"),
    ("/v1/responses", {"model": "m", "input": [
        {"role": "user", "content": "go"}, {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"role": "user", "content": "well?"}]}, "tool call 'c1' is not answered before"),
    ("/v1/responses", {"model": "m", "input": [{"type": "function_call_output", "call_id": "c9", "output": "x"}]},
     "item 0: field 'call_id': function_call_output answers call_id 'c9', which no earlier call has"),
], ids=["chat-unanswered", "chat-pending", "anthropic-unanswered", "responses-unanswered", "responses-orphan"])
def test_histories_the_provider_would_refuse_get_a_400(limited_proxy, path, body, text):
    client, recorder = limited_proxy
    response = client.post(path, json=body)
    assert response.status_code == 400, response.text
    assert text in response.json()["error"]["message"]
    assert recorder.bodies == []


def test_lone_surrogates_and_parallel_responses_calls_are_forwarded(limited_proxy):
    client, recorder = limited_proxy
    raw = b'{"model": "m", "messages": [{"role": "user", "content": "lone \\udc80 surrogate"}]}'
    assert client.post("/v1/chat/completions", content=raw,
                       headers={"content-type": "application/json"}).status_code == 200
    assert recorder.bodies[-1]["messages"][0]["content"] == "lone \udc80 surrogate"  # as \u escapes, not a 500
    items = [{"role": "user", "content": "go"},
             {"type": "function_call", "call_id": "a", "name": "f", "arguments": "{}"},
             {"type": "function_call", "call_id": "b", "name": "f", "arguments": "{}"},
             {"type": "function_call_output", "call_id": "a", "output": "A"},
             {"type": "function_call_output", "call_id": "b", "output": "B"},
             {"role": "user", "content": "and?"}]
    response = client.post("/v1/responses", json={"model": "m", "input": items})
    assert response.status_code == 200, response.text
    assert recorder.bodies[-1]["input"] == items


# -- the restore tool (--restore-tool): added to requests, the model's calls answered in the proxy -----------

RESTORE = "salience_restore"


def _sse(events: list[tuple[str | None, Any]]) -> StreamingResponse:
    """Events as an SSE response, one event per chunk (as a provider writes them)."""
    def chunks() -> Iterator[bytes]:
        for name, data in events:
            text = data if isinstance(data, str) else json.dumps(data)
            yield ((f"event: {name}\n" if name else "") + f"data: {text}\n\n").encode()

    return StreamingResponse(chunks(), media_type="text/event-stream")


def _pieces(text: str, n: int = 3) -> list[str]:
    step = max(1, len(text) // n)
    return [text[i:i + step] for i in range(0, len(text), step)]


def stream_chat(reply: dict[str, Any]) -> StreamingResponse:
    """A chat.completion as Chat Completions chunks: the arguments and the text in pieces."""
    message, base = reply["choices"][0]["message"], {k: reply[k] for k in ("id", "created", "model")}

    def chunk(delta: dict[str, Any], finish: Any = None) -> dict[str, Any]:
        return {**base, "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    events: list[tuple[str | None, Any]] = [(None, chunk({"role": "assistant", "content": ""}))]
    events += [(None, chunk({"content": piece})) for piece in _pieces(message.get("content") or "")]
    for k, call in enumerate(message.get("tool_calls") or []):
        start = {"index": k, "id": call["id"], "type": "function",
                 "function": {"name": call["function"]["name"], "arguments": ""}}
        events.append((None, chunk({"tool_calls": [start]})))
        events += [(None, chunk({"tool_calls": [{"index": k, "function": {"arguments": piece}}]}))
                   for piece in _pieces(call["function"]["arguments"])]
    events += [(None, chunk({}, reply["choices"][0]["finish_reason"])), (None, "[DONE]")]
    return _sse(events)


def stream_messages(reply: dict[str, Any]) -> StreamingResponse:
    """An Anthropic message as its event stream: text and tool input JSON in pieces."""
    events: list[tuple[str | None, Any]] = [("message_start", {"type": "message_start", "message": {
        **reply, "content": [], "stop_reason": None, "usage": {"input_tokens": 1, "output_tokens": 0}}}),
        ("ping", {"type": "ping"})]
    for i, block in enumerate(reply["content"]):
        if block["type"] == "text":
            start, deltas = {"type": "text", "text": ""}, [{"type": "text_delta", "text": p}
                                                           for p in _pieces(block["text"])]
        else:
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in _pieces(json.dumps(block["input"]))]
        events.append(("content_block_start", {"type": "content_block_start", "index": i, "content_block": start}))
        events += [("content_block_delta", {"type": "content_block_delta", "index": i, "delta": d}) for d in deltas]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    events += [("message_delta", {"type": "message_delta", "delta": {"stop_reason": reply["stop_reason"],
                                                                      "stop_sequence": None},
                                  "usage": {"output_tokens": 2}}),
               ("message_stop", {"type": "message_stop"})]
    return _sse(events)


def stream_responses(reply: dict[str, Any]) -> StreamingResponse:
    """A Responses response as its event stream (items added, text deltas, done, completed)."""
    n = iter(range(10_000))
    events: list[tuple[str | None, Any]] = [("response.created", {
        "type": "response.created", "sequence_number": next(n), "response": {**reply, "status": "in_progress",
                                                                             "output": []}})]
    for i, item in enumerate(reply["output"]):
        if item["type"] == "message":
            text = item["content"][0]["text"]
            events.append(("response.output_item.added", {"type": "response.output_item.added",
                                                          "sequence_number": next(n), "output_index": i,
                                                          "item": {**item, "content": [], "status": "in_progress"}}))
            events.append(("response.content_part.added", {
                "type": "response.content_part.added", "sequence_number": next(n), "item_id": item["id"],
                "output_index": i, "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}}))
            events += [("response.output_text.delta", {
                "type": "response.output_text.delta", "sequence_number": next(n), "item_id": item["id"],
                "output_index": i, "content_index": 0, "delta": p, "logprobs": []}) for p in _pieces(text)]
        else:
            events.append(("response.output_item.added", {"type": "response.output_item.added",
                                                          "sequence_number": next(n), "output_index": i,
                                                          "item": {**item, "arguments": ""}}))
        events.append(("response.output_item.done", {"type": "response.output_item.done", "sequence_number": next(n),
                                                     "output_index": i, "item": item}))
    events.append(("response.completed", {"type": "response.completed", "sequence_number": next(n),
                                          "response": reply}))
    return _sse(events)


class ScriptedUpstream:
    """A fake OpenAI + Anthropic API whose model calls the restore tool for the first marker it sees.

    The model name says how: ``restore-once`` (one call, then an answer quoting the result),
    ``restore-mixed`` (a restore call beside a call of the client's own ``lookup`` tool),
    ``restore-forever`` (a restore call every time); anything else answers at once.
    """

    def __init__(self) -> None:
        self.received: list[tuple[str, Any]] = []
        self.app = Starlette(routes=[Route("/v1/chat/completions", self.chat, methods=["POST"]),
                                     Route("/v1/messages", self.messages, methods=["POST"]),
                                     Route("/v1/responses", self.responses, methods=["POST"])])

    async def _record(self, request: Request) -> Any:
        body = json.loads(await request.body())
        self.received.append((request.url.path, body))
        assert len(self.received) <= MAX_REQUESTS
        return body

    @staticmethod
    def _wanted(body: Any, history: Any, names: list[str], answered: bool) -> str | None:
        mode = body["model"]
        if not mode.startswith("restore-") or RESTORE not in names or (answered and mode != "restore-forever"):
            return None
        found = marker_ids(json.dumps(history))
        return found[0] if found else "m2"  # an entry that was dropped without a marker: in the archive too

    async def chat(self, request: Request) -> Response:
        body = await self._record(request)
        names = [t["function"]["name"] for t in body.get("tools", [])]
        last = body["messages"][-1]
        answered = last["role"] == "tool" and last["tool_call_id"].startswith("rs")
        wanted = self._wanted(body, body["messages"], names, answered)
        message: dict[str, Any] = {"role": "assistant", "content": f"done: {last['content'][:30]}" if answered
                                   else "plain"}
        if wanted is not None:
            calls = [{"id": f"rs{len(self.received)}", "type": "function",
                      "function": {"name": RESTORE, "arguments": json.dumps({"ids": [wanted]})}}]
            if body["model"] == "restore-mixed":
                calls.append({"id": "own1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}})
            message = {"role": "assistant", "content": None, "tool_calls": calls}
        reply = {"id": "c1", "object": "chat.completion", "created": 0, "model": body["model"],
                 "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if wanted else "stop"}]}
        return stream_chat(reply) if body.get("stream") else JSONResponse(reply)

    async def messages(self, request: Request) -> Response:
        body = await self._record(request)
        names = [t["name"] for t in body.get("tools", [])]
        last = body["messages"][-1]["content"]
        answered = isinstance(last, list) and last[0].get("type") == "tool_result" and last[0][
            "tool_use_id"].startswith("rs")
        wanted = self._wanted(body, body["messages"], names, answered)
        content: list[Any] = [{"type": "text", "text": "done" if answered else "plain"}]
        if wanted is not None:
            content = [{"type": "tool_use", "id": f"rs{len(self.received)}", "name": RESTORE,
                        "input": {"ids": [wanted]}}]
        reply = {"id": "msg_1", "type": "message", "role": "assistant", "model": body["model"], "content": content,
                 "stop_reason": "tool_use" if wanted else "end_turn", "stop_sequence": None,
                 "usage": {"input_tokens": 1, "output_tokens": 2}}
        return stream_messages(reply) if body.get("stream") else JSONResponse(reply)

    async def responses(self, request: Request) -> Response:
        body = await self._record(request)
        names = [t["name"] for t in body.get("tools", [])]
        last = body["input"][-1]
        answered = last.get("type") == "function_call_output" and last["call_id"].startswith("rs")
        wanted = self._wanted(body, body["input"], names, answered)
        output: list[Any] = [{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                              "content": [{"type": "output_text", "text": "done" if answered else "plain",
                                           "annotations": []}]}]
        if wanted is not None:
            output = [{"type": "function_call", "id": "fc_r", "call_id": f"rs{len(self.received)}", "name": RESTORE,
                       "arguments": json.dumps({"ids": [wanted]}), "status": "completed"}]
        reply = {"id": "resp_1", "object": "response", "created_at": 0, "model": body["model"], "status": "completed",
                 "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], "output": output}
        return stream_responses(reply) if body.get("stream") else JSONResponse(reply)


@pytest.fixture(scope="module")
def restoring() -> Iterator[tuple[ScriptedUpstream, Served, Any]]:
    upstream = ScriptedUpstream()
    compactor = Compactor(scorer=Flat(), budget=BUDGET, counter=words, pin_last=2, max_entry_tokens=None)
    with Served(upstream.app) as up:
        # headroom (0.3 of the room freed) that leaves a restored entry room to be appended at 1,200 tokens
        app = build_app(ProxyConfig(upstream=up.url, compactor=compactor, timeout=30, restore_tool=True,
                                    min_removal=0.3))
        with Served(app) as proxy:
            yield upstream, proxy, app


def _sent(upstream: ScriptedUpstream, before: int) -> list[Any]:
    return [body for _, body in upstream.received[before:]]


def test_restore_tool_chat_is_added_and_answered_with_the_archived_text(restoring):
    upstream, proxy, app = restoring
    history = openai_history()
    lookup = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}
    before = len(upstream.received)
    reply = openai_client(proxy).chat.completions.create(model="restore-once", messages=history, tools=[lookup])
    first, second = _sent(upstream, before)
    # the tool is added after the client's own, in the Chat Completions format
    assert [t["function"]["name"] for t in first["tools"]] == ["lookup", RESTORE]
    wanted = marker_ids(json.dumps(first["messages"]))[0]
    # the follow-up: the history compacted again (the restored text would not fit after the first
    # request), the model's call, and the archived message exactly
    assert tokens(Transcript.from_openai(second["messages"])) <= BUDGET
    call, answer = second["messages"][-2:]
    assert call["tool_calls"][0]["function"]["name"] == RESTORE
    assert answer == {"role": "tool", "tool_call_id": call["tool_calls"][0]["id"],
                      "content": history[int(wanted[1:])]["content"]}
    assert check_openai(second["messages"]) == []
    # the client sees the model's answer, never the restore call
    assert reply.choices[0].message.content == "done: " + history[int(wanted[1:])]["content"][:30]
    assert not reply.choices[0].message.tool_calls
    assert httpx.get(proxy.url + "/metrics", timeout=10).json()["chat"]["restore_calls_answered"] >= 1


def test_restore_tool_anthropic_and_responses(restoring):
    upstream, proxy, _ = restoring
    history = anthropic_history()
    before = len(upstream.received)
    reply = anthropic_client(proxy).messages.create(model="restore-once", max_tokens=64, system="Be brief.",
                                                    messages=history)
    first, second = _sent(upstream, before)
    assert first["tools"][-1]["name"] == RESTORE and "input_schema" in first["tools"][-1]
    wanted = (marker_ids(json.dumps(first["messages"])) or ["m2"])[0]
    result = second["messages"][-1]["content"][0]
    original = Transcript.from_anthropic(history, system="Be brief.")
    assert result["type"] == "tool_result" and result["content"] == next(
        e.content for e in original.entries if e.id == wanted)
    assert check_anthropic(second["messages"], system=second.get("system")) == []
    assert [b.type for b in reply.content] == ["text"] and reply.content[0].text == "done"

    items = _trip_items()
    before = len(upstream.received)
    reply = openai_client(proxy).responses.create(model="restore-once", input=items)
    first, second = _sent(upstream, before)
    assert first["tools"] == [{"type": "function", "name": RESTORE, "description": first["tools"][0]["description"],
                               "parameters": first["tools"][0]["parameters"], "strict": False}]
    wanted = marker_ids(json.dumps(first["input"]))[0]
    assert second["input"][-1]["output"] == next(e.content for e in from_responses(items).entries if e.id == wanted)
    assert check_responses(second["input"]) == []
    assert reply.output_text == "done"


def test_restore_calls_beside_the_clients_own_are_taken_out(restoring):
    upstream, proxy, _ = restoring
    before = len(upstream.received)
    reply = openai_client(proxy).chat.completions.create(model="restore-mixed", messages=openai_history())
    assert len(_sent(upstream, before)) == 1  # not answered: the client's call must go to the client
    assert [c.function.name for c in reply.choices[0].message.tool_calls] == ["lookup"]


def test_restore_rounds_are_bounded(restoring):
    upstream, proxy, _ = restoring
    before = len(upstream.received)
    reply = anthropic_client(proxy).messages.create(model="restore-forever", max_tokens=64,
                                                    messages=anthropic_history())
    assert len(_sent(upstream, before)) == 4  # the request and three answered rounds
    assert [b.type for b in reply.content] == ["text"] and "restore" in reply.content[0].text
    assert reply.stop_reason == "end_turn"


def test_restore_tool_on_a_chat_stream(restoring):
    upstream, proxy, _ = restoring
    history = openai_history()
    lookup = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}
    before = len(upstream.received)
    chunks = list(openai_client(proxy).chat.completions.create(model="restore-once", messages=history,
                                                               tools=[lookup], stream=True))
    first, second = _sent(upstream, before)
    assert first["stream"] is True and second["stream"] is True
    assert [t["function"]["name"] for t in first["tools"]] == ["lookup", RESTORE]
    wanted = marker_ids(json.dumps(first["messages"]))[0]
    call, answer = second["messages"][-2:]
    assert call["tool_calls"][0]["function"] == {"name": RESTORE, "arguments": json.dumps({"ids": [wanted]})}
    assert answer == {"role": "tool", "tool_call_id": call["tool_calls"][0]["id"],
                      "content": history[int(wanted[1:])]["content"]}
    assert check_openai(second["messages"]) == []
    # the client gets the last round's stream, and never the restore call
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "done: " + history[int(wanted[1:])]["content"][:30]
    assert not any(c.choices and c.choices[0].delta.tool_calls for c in chunks)
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_restore_tool_on_anthropic_and_responses_streams(restoring):
    upstream, proxy, _ = restoring
    history = anthropic_history()
    before = len(upstream.received)
    with anthropic_client(proxy).messages.stream(model="restore-once", max_tokens=64, system="Be brief.",
                                                 messages=history) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    first, second = _sent(upstream, before)
    assert first["tools"][-1]["name"] == RESTORE and second["stream"] is True
    result = second["messages"][-1]["content"][0]
    wanted = second["messages"][-2]["content"][0]["input"]["ids"][0]
    original = Transcript.from_anthropic(history, system="Be brief.")
    assert result["type"] == "tool_result" and result["content"] == next(
        e.content for e in original.entries if e.id == wanted)
    assert check_anthropic(second["messages"], system=second.get("system")) == []
    assert text == "done" and [b.type for b in final.content] == ["text"]

    items = _trip_items()
    before = len(upstream.received)
    events = list(openai_client(proxy).responses.create(model="restore-once", input=items, stream=True))
    first, second = _sent(upstream, before)
    wanted = marker_ids(json.dumps(first["input"]))[0]
    assert second["input"][-1]["output"] == next(e.content for e in from_responses(items).entries if e.id == wanted)
    assert events[-1].type == "response.completed" and events[-1].response.output_text == "done"
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == "done"


def test_restore_calls_taken_out_of_a_stream(restoring):
    upstream, proxy, _ = restoring
    before = len(upstream.received)
    chunks = list(openai_client(proxy).chat.completions.create(model="restore-mixed", messages=openai_history(),
                                                               stream=True))
    assert len(_sent(upstream, before)) == 1  # the client's call must go to the client
    names = [tc.function.name for c in chunks if c.choices for tc in c.choices[0].delta.tool_calls or []]
    assert names == ["lookup"] and chunks[-1].choices[0].finish_reason == "tool_calls"

    before = len(upstream.received)
    with anthropic_client(proxy).messages.stream(model="restore-forever", max_tokens=64,
                                                 messages=anthropic_history()) as stream:
        final = stream.get_final_message()
    assert len(_sent(upstream, before)) == 4  # the request and three answered rounds
    assert [b.type for b in final.content] == ["text"] and "restore" in final.content[0].text
    assert final.stop_reason == "end_turn"


@pytest.mark.parametrize("budget", [BUDGET, 1200, 150], ids=["recompacted", "appended", "too-big-to-fit"])
def test_a_restore_follow_up_stays_within_the_budget(restoring, budget):
    upstream, proxy, _ = restoring
    history = openai_history(12)
    before = len(upstream.received)
    client = openai_client(proxy, default_headers={"x-salience-budget": str(budget)})
    reply = client.chat.completions.create(model="restore-once", messages=history)
    first, second = _sent(upstream, before)
    wanted = marker_ids(json.dumps(first["messages"]))[0]
    call, answer = second["messages"][-2:]
    assert call["tool_calls"][0]["function"]["name"] == RESTORE
    assert answer["content"] == history[int(wanted[1:])]["content"]  # restored exactly
    # the restored text counts against the budget; the follow-up is valid either way
    assert tokens(Transcript.from_openai(first["messages"])) <= budget
    assert check_openai(second["messages"]) == []
    appended = tokens(Transcript.from_openai(first["messages"] + [call, answer]))
    if budget == 150:  # the restored entry alone is over the budget: appended rather than lost
        assert second["messages"][:len(first["messages"])] == first["messages"] and appended > budget
        return
    assert tokens(Transcript.from_openai(second["messages"])) <= budget
    if budget == BUDGET:  # appending the restored entry would pass the budget: compacted again
        assert appended > budget and second["messages"][:len(first["messages"])] != first["messages"]
    else:  # there is room after the first request: appended, so the cached prefix stays
        assert second["messages"][:len(first["messages"])] == first["messages"]
    assert reply.choices[0].message.content.startswith("done: ")


def test_a_plain_answer_to_a_streaming_request_has_its_restore_calls_answered() -> None:
    # An upstream may answer a streaming request with a plain JSON body: the proxy reads what it
    # sent, answers the restore call inside, and the client never sees it (the fuzz found the
    # restore call passed through to the client).
    from starlette.testclient import TestClient

    bodies: list[Any] = []

    def upstream(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        assert len(bodies) < MAX_REQUESTS
        if len(bodies) == 1:
            message = {"role": "assistant", "content": None, "tool_calls": [
                {"id": "rs_1", "type": "function", "function": {"name": "salience_restore",
                                                                "arguments": '{"ids": ["m1"]}'}}]}
        else:
            message = {"role": "assistant", "content": "Done."}
        return httpx.Response(200, json={"object": "chat.completion", "choices": [{"index": 0, "message": message}]})

    history = [{"role": "system", "content": "You are terse."},
               {"role": "user", "content": " ".join(f"word{i}" for i in range(400))},
               {"role": "assistant", "content": "Noted."},
               {"role": "user", "content": "Now finish."}]
    compactor = Compactor(scorer=Flat(), counter=words, pin_last=2, max_entry_tokens=None)
    config = ProxyConfig(upstream="http://upstream.test", compactor=compactor, budget=60,
                         transport=httpx.MockTransport(upstream), restore_tool=True)
    with TestClient(build_app(config), raise_server_exceptions=False) as client:
        response = client.post("/v1/chat/completions", json={"model": "m", "messages": history, "stream": True})
    assert response.status_code == 200
    assert "rs_1" not in response.text and response.json()["choices"][0]["message"]["content"] == "Done."
    assert len(bodies) == 2 and any(m.get("tool_call_id") == "rs_1" for m in bodies[1]["messages"])


def test_a_bad_session_setting_fails_when_the_app_is_built() -> None:
    compactor = Compactor(scorer=Flat(), budget=BUDGET, counter=words)
    with pytest.raises(ParameterError, match="min_removal"):
        build_app(ProxyConfig(upstream="http://127.0.0.1:9", compactor=compactor, min_removal=1.5))
    with pytest.raises(ParameterError, match="trigger"):
        build_app(ProxyConfig(upstream="http://127.0.0.1:9", compactor=compactor, trigger=0.0))
    with pytest.raises(ParameterError, match="cache_min"):
        build_app(ProxyConfig(upstream="http://127.0.0.1:9", compactor=compactor, cache_min=-1))
