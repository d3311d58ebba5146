"""``salience proxy``: an OpenAI- and Anthropic-compatible HTTP proxy that compacts each request.

Point an agent you did not write at it (Claude Code with ``ANTHROPIC_BASE_URL``, any
OpenAI-compatible client with its base URL) and every request's history is compacted
to a token budget before it is forwarded to the upstream API.

Endpoints (``POST``):

* ``/v1/chat/completions``: OpenAI chat; ``messages`` compacted;
* ``/v1/responses``: OpenAI Responses; ``input`` (a list of items) and ``instructions``
  compacted together (:mod:`salience.messages.responses`);
* ``/v1/messages``: Anthropic; ``messages`` and ``system`` compacted together.

Everything else (``GET /v1/models``, ``/v1/messages/count_tokens``...) is forwarded
untouched. ``GET /metrics`` (not forwarded) reports, per endpoint, requests, tokens in and
out and the proxy's own latency (p50, p99), as JSON.

Rules:

* **Budget**: ``budget`` tokens, or a share of the model's context window
  (``budget_share``, with ``window`` tokens, or :data:`WINDOWS` by model name); a request
  header ``x-salience-budget: N`` or ``P%`` wins.
* **Sessions**: one :class:`~salience.selector.compactor.CompactionSession` per
  conversation, keyed by the ``x-salience-conversation`` header, else by the endpoint,
  model and first messages (the prefix), so the provider's cached prefix stays stable.
* **Pass-through**: the response (plain or SSE stream) comes back byte for byte with the
  upstream's status and headers (hop-by-hop ones aside); request headers are forwarded
  (``authorization``, ``x-api-key``, ``anthropic-version``...) but never logged.
* **Bad input**: a body is read no further than ``limits.max_bytes`` and parsed within
  the other :mod:`salience.limits` (``ProxyConfig.limits``; ``salience proxy --max-depth
  --max-bytes --max-entries``). A body larger than the limit gets a 413; one that is not
  UTF-8, not standard JSON (``NaN`` and ``Infinity`` included: the providers refuse them),
  nested deeper or with more messages than the limits, a field of the wrong shape, or a
  history the provider would refuse (:mod:`salience.messages.validate`,
  :func:`~salience.messages.responses.check_responses`: an unanswered call, a result
  before its call...) gets a 400. The error (in the provider's error shape) names where:
  the line and column, the field, the message or item; it is never forwarded, and never
  a 500. An upstream that cannot be reached gets a 502.
* **Restore tool** (``restore_tool``, ``--restore-tool``): added to compacted requests,
  streaming or not; the model's calls to it answered inside the proxy from that request's
  archive, each follow-up compacted again so the restored text counts against the
  budget. A streaming request with the tool is read from the upstream to its end before
  the client gets it (what is and is not supported: :mod:`salience.adapters._proxy_restore`).
* **Logs**: one line per request (endpoint, status, tokens, milliseconds); nothing of
  the prompt unless ``log_content``.

Needs ``starlette``, ``uvicorn`` and ``httpx``: ``pip install "salience[proxy]"``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

try:
    import anyio.to_thread
    import httpx
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError('salience proxy needs starlette, uvicorn and httpx: pip install "salience[proxy]"') from exc

from salience.adapters._proxy_restore import add_tool, follow_up, restore_calls, strip_calls, wants_tool
from salience.adapters._proxy_stream import accumulate
from salience.adapters._proxy_stream import parse as parse_events
from salience.adapters._proxy_stream import render as render_events
from salience.errors import BudgetError, LimitError, ParameterError, SalienceError, TranscriptError, describe
from salience.limits import Limits, check_size, current, limited, loads
from salience.messages.responses import check_responses, from_responses, to_responses
from salience.messages.validate import check_anthropic, check_openai
from salience.selector.restore import RestoreTool
from salience.selector.session import CACHE_MIN, RESTART_GAIN
from salience.transcript import Entry, Transcript

if TYPE_CHECKING:
    from salience.selector.compactor import Compaction, CompactionSession

__all__ = ["WINDOWS", "ProxyConfig", "ProxyMetrics", "build_app", "parse_budget"]

log = logging.getLogger("salience.proxy")

#: Context windows by model-name prefix (tokens), for a budget given as a share.
WINDOWS: tuple[tuple[str, int], ...] = (
    ("claude", 200_000), ("gpt-4.1", 1_000_000), ("gpt-5", 400_000), ("gpt-4o", 128_000), ("o1", 200_000),
    ("o3", 200_000), ("o4", 200_000), ("gpt-4", 128_000), ("gpt-3.5", 16_000),
)
#: Window assumed for a model not in :data:`WINDOWS`.
DEFAULT_WINDOW = 128_000

BUDGET_HEADER = "x-salience-budget"
CONVERSATION_HEADER = "x-salience-conversation"
_HOP = frozenset({"host", "content-length", "connection", "keep-alive", "transfer-encoding", "te", "trailer",
                  "upgrade", "proxy-authorization", "proxy-connection", "accept-encoding"})
_RESPONSE_HOP = frozenset({"content-length", "connection", "keep-alive", "transfer-encoding", "content-encoding"})
_PERCENT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")


class ProxyError(ParameterError):
    """A request the proxy refuses (a 400), naming the field."""

    def __init__(self, message: str, *, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


def parse_budget(text: str) -> tuple[int | None, float | None]:
    """``"8000"`` -> ``(8000, None)``; ``"25%"`` -> ``(None, 0.25)``; anything else a :class:`ProxyError`.

    >>> parse_budget("8000"), parse_budget("25%")
    ((8000, None), (None, 0.25))
    """
    match = _PERCENT.match(text)
    if match:
        share = float(match.group(1)) / 100
        if 0 < share <= 1:
            return None, share
    elif text.strip().isdigit() and int(text) > 0:
        return int(text), None
    raise ProxyError(f"budget must be a positive number of tokens or a percentage such as 25% (got {text!r})",
                     param=BUDGET_HEADER)


@dataclass(slots=True)
class ProxyConfig:
    """What the proxy does (see the module doc).

    ``upstream``: base URL of the API (``https://api.openai.com``, ``https://api.anthropic.com``;
    a trailing ``/v1`` is fine). ``budget`` tokens or ``budget_share`` of ``window`` (None:
    by model name). ``transport``: an ``httpx`` transport (tests: ``httpx.MockTransport``).
    ``limits``: the bounds on a request body (:mod:`salience.limits`; default: the limits in
    force where the config is made, :func:`salience.limits.current`). ``restore_tool``: add
    the restore tool to compacted requests (streaming ones too) and answer its calls, at most
    ``restore_rounds`` times per request (:mod:`salience.adapters._proxy_restore`).
    ``trigger``, ``min_removal``, ``restart_gain``, ``cache_min``: the conversations' sessions'
    (:meth:`Compactor.session <salience.selector.compactor.Compactor.session>`; more headroom leaves a restored entry
    room to be appended to the cached request).
    """

    upstream: str
    compactor: Any
    budget: int | None = None
    budget_share: float | None = None
    window: int | None = None
    timeout: float = 600.0
    log_content: bool = False
    max_sessions: int = 1024
    transport: Any = None
    limits: Limits = field(default_factory=current)
    restore_tool: bool = False
    restore_rounds: int = 3
    trigger: float = 1.0
    min_removal: float | int = 0.1
    restart_gain: float | None = RESTART_GAIN
    cache_min: int = CACHE_MIN


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[k]


@dataclass(slots=True)
class ProxyMetrics:
    """Counters per endpoint: requests, errors, tokens in and out, the proxy's own latency (ms)."""

    requests: dict[str, int] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    tokens_in: dict[str, int] = field(default_factory=dict)
    tokens_out: dict[str, int] = field(default_factory=dict)
    compacted: dict[str, int] = field(default_factory=dict)
    restored: dict[str, int] = field(default_factory=dict)
    latency: dict[str, deque[float]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, endpoint: str, *, tokens_in: int = 0, tokens_out: int = 0, ms: float | None = None,
               error: bool = False, compacted: bool = False, restored: int = 0) -> None:
        with self.lock:
            self.restored[endpoint] = self.restored.get(endpoint, 0) + restored
            self.requests[endpoint] = self.requests.get(endpoint, 0) + 1
            self.errors[endpoint] = self.errors.get(endpoint, 0) + int(error)
            self.tokens_in[endpoint] = self.tokens_in.get(endpoint, 0) + tokens_in
            self.tokens_out[endpoint] = self.tokens_out.get(endpoint, 0) + tokens_out
            self.compacted[endpoint] = self.compacted.get(endpoint, 0) + int(compacted)
            if ms is not None:
                self.latency.setdefault(endpoint, deque(maxlen=10_000)).append(ms)

    def as_dict(self) -> dict[str, Any]:
        with self.lock:
            out = {}
            for endpoint, n in self.requests.items():
                lat = list(self.latency.get(endpoint, ()))
                out[endpoint] = {
                    "requests": n, "errors": self.errors.get(endpoint, 0), "compacted": self.compacted.get(endpoint, 0),
                    "restore_calls_answered": self.restored.get(endpoint, 0),
                    "tokens_in": self.tokens_in.get(endpoint, 0), "tokens_out": self.tokens_out.get(endpoint, 0),
                    "tokens_saved": self.tokens_in.get(endpoint, 0) - self.tokens_out.get(endpoint, 0),
                    "latency_ms_p50": round(_percentile(lat, 0.5), 3),
                    "latency_ms_p99": round(_percentile(lat, 0.99), 3),
                }
            return out


class _Proxy:
    """The proxy's state: config, sessions, metrics, the upstream client."""

    def __init__(self, config: ProxyConfig) -> None:
        self.config = config
        base = config.upstream.rstrip("/")
        self.base = base[:-3] if base.endswith("/v1") else base
        self.metrics = ProxyMetrics()
        self.sessions: OrderedDict[Any, CompactionSession] = OrderedDict()
        self.session_locks: dict[Any, threading.Lock] = {}
        self.lock = threading.Lock()
        self.client: httpx.AsyncClient | None = None
        # a bad trigger, min_removal, restart_gain or cache_min fails here, not at the first request
        config.compactor.session(budget=1, trigger=config.trigger, min_removal=config.min_removal,
                                 restart_gain=config.restart_gain, cache_min=config.cache_min)
        make = getattr(config.compactor, "restore_tool", None)
        self.restore: RestoreTool = make() if callable(make) else RestoreTool()

    # -- budget and sessions --------------------------------------------------------------------
    def budget_for(self, request: Request, model: Any) -> int:
        header = request.headers.get(BUDGET_HEADER)
        tokens, share = parse_budget(header) if header else (self.config.budget, self.config.budget_share)
        if tokens is not None:
            return tokens
        if share is None:
            return int(getattr(self.config.compactor, "budget", 8000))
        window = self.config.window
        if window is None:
            name = model if isinstance(model, str) else ""
            window = next((w for prefix, w in WINDOWS if name.startswith(prefix)), DEFAULT_WINDOW)
        return max(1, int(window * share))

    def session_for(self, key: Any, budget: int) -> tuple[CompactionSession, threading.Lock]:
        key = (key, budget)
        with self.lock:
            session = self.sessions.get(key)
            if session is None:
                session = self.config.compactor.session(budget=budget, trigger=self.config.trigger,
                                                        min_removal=self.config.min_removal,
                                                        restart_gain=self.config.restart_gain,
                                                        cache_min=self.config.cache_min)
                self.sessions[key] = session
                self.session_locks[key] = threading.Lock()
                while len(self.sessions) > self.config.max_sessions:
                    old, _ = self.sessions.popitem(last=False)
                    self.session_locks.pop(old, None)
            else:
                self.sessions.move_to_end(key)
            return session, self.session_locks[key]

    def conversation(self, request: Request, endpoint: str, model: Any, prefix: Any) -> Any:
        header = request.headers.get(CONVERSATION_HEADER)
        if header:
            return ("header", header)
        digest = hashlib.sha256(json.dumps([endpoint, model, prefix], sort_keys=True, default=str).encode())
        return ("prefix", digest.hexdigest())

    # -- compaction of one body (runs in a worker thread) -----------------------------------------
    def compact_body(self, endpoint: str, body: dict[str, Any], key: Any, budget: int) -> tuple[dict[str, Any],
                                                                                                 Compaction | None]:
        session, lock = self.session_for(key, budget)
        with lock, limited(self.config.limits):
            return self._compact(endpoint, body, session.compact)

    def compact_follow_up(self, endpoint: str, body: dict[str, Any], budget: int) -> tuple[dict[str, Any],
                                                                                            Compaction]:
        """A restore follow-up (the client's history, the model's restore calls and their
        answers) compacted afresh to ``budget``, outside the conversation's session: the
        client's next request will not hold the restore exchange, and the session must not
        take it for the history it extends."""
        compactor = self.config.compactor

        def compact(messages: Any, **kw: Any) -> Compaction:
            return compactor.compact(messages, budget=budget, **kw)  # type: ignore[no-any-return]

        with limited(self.config.limits):
            return self._compact(endpoint, body, compact)

    @staticmethod
    def _compact(endpoint: str, body: dict[str, Any], compact: Any) -> tuple[dict[str, Any], Compaction]:
        if endpoint == "chat":
            result = compact(body["messages"], format="openai")
            return {**body, "messages": result.messages}, result
        if endpoint == "messages":
            system = body.get("system")
            result = compact(body["messages"], system=system, format="anthropic")
            out = {**body, "messages": result.messages}
            if system is not None or result.system is not None:
                out["system"] = result.system if result.system is not None else system
            return out, result
        # responses: instructions first, as a system entry
        source = from_responses(body["input"])
        instructions = body.get("instructions")
        if isinstance(instructions, str) and instructions:
            source = Transcript(id=source.id, entries=(Entry(id="instructions", role="system",
                                                             content=instructions), *source.entries))
        result = compact(source)
        entries = result.transcript.entries
        out = dict(body)
        if entries and entries[0].id == "instructions":
            out["instructions"] = entries[0].content
            entries = entries[1:]
        out["input"] = to_responses(Transcript(id=source.id, entries=entries))
        return out, result


def _kept_whole(endpoint: str, fresh: dict[str, Any], appended: dict[str, Any], sent: dict[str, Any]) -> bool:
    """Whether the compacted follow-up ``fresh`` ends with the restore exchange (what
    ``appended`` added to the request ``sent``: the model's turn and the answers) exactly:
    else the restored text would be lost."""
    key = "input" if endpoint == "responses" else "messages"
    want, got, before = appended.get(key), fresh.get(key), sent.get(key)
    if not isinstance(want, list) or not isinstance(got, list) or not isinstance(before, list):
        return False
    tail = len(want) - len(before)
    return 0 < tail <= len(got) and got[-tail:] == want[-tail:]


def _check_body(endpoint: str, body: Any) -> None:
    """A :class:`ProxyError` naming the field when ``body`` is not the shape ``endpoint`` takes."""
    if not isinstance(body, dict):
        raise ProxyError(f"the request body must be a JSON object (got {describe(body)})", param="body")
    if endpoint in ("chat", "messages"):
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ProxyError(f"field 'messages' must be a non-empty list (got {describe(messages)})",
                             param="messages")
        for i, m in enumerate(messages):
            if not isinstance(m, dict):
                raise ProxyError(f"field 'messages[{i}]' must be an object (got {describe(m)})",
                                 param=f"messages[{i}]")
            if not isinstance(m.get("role"), str):
                raise ProxyError(f"field 'messages[{i}].role' must be a string (got {describe(m.get('role'))})",
                                 param=f"messages[{i}].role")
        if endpoint == "messages":
            system = body.get("system")
            if system is not None and not isinstance(system, (str, list)):
                raise ProxyError(f"field 'system' must be a string or a list of blocks (got {describe(system)})",
                                 param="system")
    elif endpoint == "responses":
        items = body.get("input")
        if not isinstance(items, (str, list)):
            raise ProxyError(f"field 'input' must be a string or a list of items (got {describe(items)})",
                             param="input")
        if isinstance(items, list):
            for i, item in enumerate(items):
                if not isinstance(item, dict):
                    raise ProxyError(f"field 'input[{i}]' must be an object (got {describe(item)})",
                                     param=f"input[{i}]")
        instructions = body.get("instructions")
        if instructions is not None and not isinstance(instructions, str):
            raise ProxyError(f"field 'instructions' must be a string (got {describe(instructions)})",
                             param="instructions")
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise ProxyError(f"field 'model' must be a string (got {describe(model)})", param="model")


def _error(endpoint: str, status: int, message: str, param: str | None = None) -> JSONResponse:
    """An error in the provider's own shape."""
    if endpoint == "messages":
        kind = {400: "invalid_request_error", 413: "request_too_large"}.get(status, "api_error")
        return JSONResponse({"type": "error", "error": {"type": kind, "message": message}}, status_code=status)
    return JSONResponse({"error": {"message": message, "type": "invalid_request_error" if status in (400, 413)
                                   else "proxy_error", "param": param, "code": None}}, status_code=status)


class _BodyError(Exception):
    """A request body refused before it is compacted: status, message, param."""

    def __init__(self, status: int, message: str, param: str | None = "body") -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param


async def _read_body(request: Request, limits: Limits) -> bytes:
    """The request body, read no further than ``limits.max_bytes`` (a 413 past it)."""
    maximum = limits.max_bytes
    declared = request.headers.get("content-length", "")
    try:
        if declared.strip().isdigit():
            check_size(int(declared), where="request body (content-length)", limits=limits)
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > maximum:
                check_size(size, where="request body", limits=limits, unit="bytes or more")
            chunks.append(chunk)
    except LimitError as exc:
        raise _BodyError(413, str(exc)) from None
    return b"".join(chunks)


def _parse_body(raw: bytes, limits: Limits) -> Any:
    """The JSON value of ``raw``: strict UTF-8, standard JSON (no NaN or Infinity), within ``limits``."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _BodyError(400, f"request body: not UTF-8 text (at byte offset {exc.start}: {exc.reason})") from None
    try:
        return loads(text, where="request body", limits=limits, strict=True)
    except LimitError as exc:
        raise _BodyError(413 if exc.limit == "max_bytes" else 400, str(exc)) from None
    except SalienceError as exc:
        raise _BodyError(400, str(exc)) from None


def _provider_problems(endpoint: str, body: dict[str, Any]) -> list[str]:
    """What the provider would refuse in ``body``'s history (:mod:`salience.messages.validate`)."""
    if endpoint == "chat":
        return check_openai(body["messages"])
    if endpoint == "messages":
        return check_anthropic(body["messages"], system=body.get("system"), alternation=False)
    items = body["input"]
    return check_responses(items) if isinstance(items, list) else []


def _encode(body: Any) -> bytes:
    """``body`` as UTF-8 JSON; ``\\u`` escapes where a string holds a lone surrogate (UTF-8 has none)."""
    try:
        return json.dumps(body, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        return json.dumps(body, ensure_ascii=True).encode()


def _forward_headers(request: Request) -> dict[str, str]:
    return {k: v for k, v in request.headers.items() if k.lower() not in _HOP and not k.lower().startswith(
        "x-salience-")}


def _response_headers(headers: httpx.Headers) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k.lower() not in _RESPONSE_HOP}


def build_app(config: ProxyConfig) -> Starlette:
    """The proxy as an ASGI app (serve it with ``uvicorn``; ``app.state.proxy`` holds its state)."""
    proxy = _Proxy(config)

    async def client() -> httpx.AsyncClient:
        if proxy.client is None:
            proxy.client = httpx.AsyncClient(timeout=httpx.Timeout(config.timeout, connect=30.0),
                                             transport=config.transport)
        return proxy.client

    def unreachable(path: str, exc: Exception) -> Response:
        log.warning("upstream %s unreachable: %s", proxy.base, type(exc).__name__)
        endpoint = {"/v1/messages": "messages"}.get(path, "chat")
        return _error(endpoint, 502, f"salience proxy: the upstream could not be reached ({type(exc).__name__})")

    async def send_restoring(request: Request, path: str, endpoint: str, body: dict[str, Any],
                             result: Compaction, source: dict[str, Any], budget: int) -> tuple[Response, int]:
        """Forward a request that has the restore tool and answer the model's restore calls (at
        most ``restore_rounds`` times); (the last answer, the restore calls answered).

        ``source``: the client's body (uncompacted, with the tool). A follow-up is the request
        as sent with the model's restore turn and the answers appended when that fits
        ``budget`` (the cached prefix stays); otherwise the client's history with the
        exchange, compacted afresh (:meth:`_Proxy.compact_follow_up`): either way a restored
        entry counts against the budget like any other. A streaming request is read to its
        end each round (:mod:`salience.adapters._proxy_stream`)."""
        http = await client()
        restore = proxy.restore
        streaming = bool(body.get("stream"))
        answered = 0
        sent = result.tokens  # tokens of the request as sent, as the compactor counts them
        for turn in range(config.restore_rounds + 1):
            upstream = http.build_request(request.method, proxy.base + path, headers=_forward_headers(request),
                                          content=_encode(body), params=request.query_params)
            try:
                response = await http.send(upstream)
            except httpx.HTTPError as exc:
                return unreachable(path, exc), answered
            data = response.content
            reply: Any = None
            # an upstream may answer a streaming request with a plain body: read (and write) what it sent
            sse = streaming and "text/event-stream" in response.headers.get("content-type", "")
            if response.status_code == 200 and sse:
                reply = accumulate(endpoint, parse_events(data))
            elif response.status_code == 200:
                try:
                    reply = json.loads(data)
                except ValueError:
                    reply = None
            calls, others = restore_calls(endpoint, reply, restore)
            if not calls or not isinstance(reply, dict):
                break
            if others or turn == config.restore_rounds:
                stripped = strip_calls(endpoint, reply, restore)
                data = render_events(endpoint, stripped) if sse else _encode(stripped)
                break
            answers = [(cid, restore.answer(result, arguments)) for cid, arguments in calls]
            answered += len(answers)
            appended = follow_up(endpoint, body, reply, answers)
            source = follow_up(endpoint, source, reply, answers)
            try:
                fresh, new = await anyio.to_thread.run_sync(proxy.compact_follow_up, endpoint, source, budget)
            except SalienceError as exc:  # over budget with the restored text alone, or ids that collide
                log.warning("%s: a restore follow-up could not be compacted (%s); forwarded appended", path,
                            type(exc).__name__)
                body, sent = appended, budget + 1  # not known: a next round compacts afresh
                continue
            added = new.source_tokens - result.source_tokens  # the model's turn and the answers
            result = new
            if sent + added <= budget:  # the exchange fits after what was sent: the cached prefix stays
                body, sent = appended, sent + added
            elif not _kept_whole(endpoint, fresh, appended, body):
                log.warning("%s: the restored text does not fit the budget whole; forwarded appended", path)
                body, sent = appended, sent + added
            elif _provider_problems(endpoint, fresh):  # pragma: no cover - a bug
                log.warning("%s: the compacted follow-up would be refused; forwarded appended", path)
                body, sent = appended, sent + added
            else:
                body, sent = fresh, new.tokens
        return Response(data, status_code=response.status_code, headers=_response_headers(response.headers)), answered

    async def send(request: Request, path: str, content: bytes) -> Response:
        http = await client()
        upstream = http.build_request(request.method, proxy.base + path, headers=_forward_headers(request),
                                      content=content, params=request.query_params)
        try:
            response = await http.send(upstream, stream=True)
        except httpx.HTTPError as exc:
            return unreachable(path, exc)
        content_type = response.headers.get("content-type", "")
        if "text/event-stream" in content_type:
            async def stream() -> Any:
                try:
                    async for chunk in response.aiter_raw():
                        yield chunk
                finally:
                    await response.aclose()

            return StreamingResponse(stream(), status_code=response.status_code,
                                     headers=_response_headers(response.headers))
        data = await response.aread()
        await response.aclose()
        return Response(data, status_code=response.status_code, headers=_response_headers(response.headers))

    def handler(endpoint: str, path: str) -> Any:
        async def handle(request: Request) -> Response:
            started = time.perf_counter()
            try:
                raw = await _read_body(request, config.limits)
                body = _parse_body(raw, config.limits)
            except _BodyError as exc:
                proxy.metrics.record(endpoint, error=True)
                return _error(endpoint, exc.status, f"salience proxy: {exc.message}", exc.param)
            original = body
            try:
                _check_body(endpoint, body)
                budget = proxy.budget_for(request, body.get("model"))
                compactable = not (endpoint == "responses" and isinstance(body["input"], str))
                result = None
                if compactable:
                    first = body["messages"][:2] if endpoint != "responses" else body["input"][:2]
                    prefix = [body.get("system") or body.get("instructions"), first]
                    key = proxy.conversation(request, endpoint, body.get("model"), prefix)
                    try:
                        body, result = await anyio.to_thread.run_sync(proxy.compact_body, endpoint, body, key,
                                                                      budget)
                    except BudgetError as exc:  # the system prompt alone is over: sent as it came
                        log.warning("%s: over budget, forwarded uncompacted (%s)", path, exc.budget)
                problems = _provider_problems(endpoint, original)
                if problems:
                    raise ProxyError(f"the provider would refuse this history: {problems[0]}"
                                     + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""),
                                     param="input" if endpoint == "responses" else "messages")
                if result is not None and _provider_problems(endpoint, body):  # pragma: no cover - a bug
                    log.warning("%s: the compacted request would be refused; forwarded uncompacted", path)
                    body, result = original, None
            except LimitError as exc:
                proxy.metrics.record(endpoint, error=True)
                return _error(endpoint, 413 if exc.limit == "max_bytes" else 400, f"salience proxy: {exc}", None)
            except TranscriptError as exc:
                proxy.metrics.record(endpoint, error=True)
                return _error(endpoint, 400, f"salience proxy: {exc}", None)
            except ProxyError as exc:
                proxy.metrics.record(endpoint, error=True)
                return _error(endpoint, 400, f"salience proxy: {exc}", exc.param)
            except SalienceError as exc:
                proxy.metrics.record(endpoint, error=True)
                return _error(endpoint, 400, f"salience proxy: {exc}", None)
            restoring = result is not None and config.restore_tool and wants_tool(endpoint, body)
            if restoring:
                body = add_tool(endpoint, body, proxy.restore)
            content = _encode(body) if result is not None else raw
            ms = (time.perf_counter() - started) * 1000
            tokens_in = result.source_tokens if result is not None else 0
            tokens_out = result.tokens if result is not None else 0
            restored = 0
            if restoring and result is not None:
                response, restored = await send_restoring(request, path, endpoint, body, result,
                                                          add_tool(endpoint, original, proxy.restore), budget)
            else:
                response = await send(request, path, content)
            proxy.metrics.record(endpoint, tokens_in=tokens_in, tokens_out=tokens_out, ms=ms,
                                 error=response.status_code >= 400, restored=restored,
                                 compacted=result is not None and result.tokens < result.source_tokens)
            log.info("%s %s -> %d: %d -> %d tokens, %.1f ms", request.method, path, response.status_code,
                     tokens_in, tokens_out, ms)
            if config.log_content:
                log.info("%s request sent: %s", path, content[:2000].decode(errors="replace"))
            return response

        return handle

    async def passthrough(request: Request) -> Response:
        try:
            raw = await _read_body(request, config.limits)
        except _BodyError as exc:
            endpoint = "messages" if request.url.path.startswith("/v1/messages") else "chat"
            return _error(endpoint, exc.status, f"salience proxy: {exc.message}", exc.param)
        return await send(request, request.url.path, raw)

    async def metrics(request: Request) -> Response:
        return JSONResponse(proxy.metrics.as_dict())

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        if proxy.client is not None:
            await proxy.client.aclose()
            proxy.client = None

    routes = [
        Route("/v1/chat/completions", handler("chat", "/v1/chat/completions"), methods=["POST"]),
        Route("/v1/responses", handler("responses", "/v1/responses"), methods=["POST"]),
        Route("/v1/messages", handler("messages", "/v1/messages"), methods=["POST"]),
        Route("/metrics", metrics, methods=["GET"]),
        Route("/{path:path}", passthrough, methods=["GET", "POST", "PUT", "PATCH", "DELETE"]),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.proxy = proxy
    return app


def serve(config: ProxyConfig, *, host: str = "127.0.0.1", port: int = 8787) -> None:  # pragma: no cover
    """Run the proxy with uvicorn until interrupted."""
    import uvicorn

    uvicorn.run(build_app(config), host=host, port=port, log_level="info", access_log=False)


def window_note(config: ProxyConfig) -> str:
    """One line saying what the budget is, for the command line."""
    if config.budget is not None:
        return f"budget {config.budget:,} tokens"
    if config.budget_share is not None:
        where = f"{config.window:,}-token window" if config.window else "model's window"
        return f"budget {config.budget_share:.0%} of the {where}"
    return f"budget {getattr(config.compactor, 'budget', 8000):,} tokens (the compactor's)"
