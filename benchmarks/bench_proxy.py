"""The proxy's overhead per request, and the tokens it saves on a replay of tau-bench airline.

Run: ``python benchmarks/bench_proxy.py [--sizes 100 1000] [--requests 60] [--runs 40] [--out DIR]``

* **Overhead**: a fake OpenAI upstream (Starlette under uvicorn on 127.0.0.1, answering at
  once) and ``salience proxy`` in front of it, both in this process on free ports. For each
  size ``n``, an agent loop's history (the project's agent samples one after another behind
  one system prompt, each repetition with its own call ids and numbers, cut to ``n``
  messages) grows by one message per request over ``--requests`` requests; each request
  is sent once straight to the upstream and once through the proxy (budget: a quarter of
  the history's tokens, one session per conversation, the default scorer). Reported: the
  wall time per request, p50 and p99, of both, and their difference (the overhead).
* **Tokens saved**: every run of the shared tau-bench airline set (``--runs``, from
  ``../shared/data/tau-bench-airline``) replayed through the proxy: at each assistant step
  the history before it is sent as a chat-completions request with the budget the recall
  benchmarks use (the system tokens plus a quarter of the others, as an
  ``x-salience-budget`` header), one conversation header per run. Reported: the tokens the
  requests held and the tokens forwarded, from the proxy's ``/metrics``.

Prints a table and writes ``proxy.json`` into ``--out`` (default ``benchmarks/out``).
Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import httpx  # noqa: E402
import uvicorn  # noqa: E402
from starlette.applications import Starlette  # noqa: E402
from starlette.requests import Request  # noqa: E402
from starlette.responses import JSONResponse  # noqa: E402
from starlette.routing import Route  # noqa: E402

from salience import Compactor, load_transcripts  # noqa: E402
from salience.adapters.proxy import ProxyConfig, build_app  # noqa: E402
from salience.tokens import default_counter  # noqa: E402
from salience.transcript import Transcript  # noqa: E402

REPLY = {"id": "c1", "object": "chat.completion", "created": 0, "model": "gpt-4o",
         "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Served:
    def __init__(self, app: Any) -> None:
        self.port = free_port()
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning",
                                                    access_log=False))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> Served:
        self.thread.start()
        while not self.server.started:
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


async def chat(request: Request) -> JSONResponse:
    await request.body()
    return JSONResponse(REPLY)


def agent_history(n: int) -> list[dict[str, Any]]:
    """The samples' agent runs behind one system prompt, call ids and numbers made unique per repetition."""
    runs = load_transcripts([ROOT / "data" / "coding_agent.jsonl", ROOT / "data" / "customer_service.jsonl"])
    out: list[dict[str, Any]] = [{"role": "system", "content": "You are a careful agent. Use the tools."}]
    rep = 0
    while len(out) < n:
        for t in runs:
            for m in t.to_openai():
                if m.get("role") == "system":
                    continue
                text = json.dumps(m)
                for d in "0123456789":
                    text = text.replace(f"{d}{d}", f"{d}{(int(d) + rep) % 10}")
                m = json.loads(text)
                m.pop("id", None)
                # each repetition its own call ids (the keys stay: "content" was once renamed here)
                if m.get("tool_call_id"):
                    m["tool_call_id"] = f"r{rep}_{m['tool_call_id']}"
                for call in m.get("tool_calls") or []:
                    call["id"] = f"r{rep}_{call['id']}"
                out.append(m)
            rep += 1
    out = out[:n]
    while out[-1].get("role") == "assistant" and out[-1].get("tool_calls"):
        out.pop()  # no unanswered call at the end
    return out


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def overhead(sizes: list[int], requests: int, upstream: Served) -> list[dict[str, Any]]:
    counter = default_counter()
    rows = []
    for n in sizes:
        full = agent_history(n + requests)
        compactor = Compactor(on_over_budget="keep_pins")
        base = Transcript.from_openai(full[:n])
        budget = max(1, sum(counter.count_entries(base.entries)) // 4)
        app = build_app(ProxyConfig(upstream=upstream.url, compactor=compactor, budget=budget))
        direct, proxied = [], []
        with Served(app) as proxy, httpx.Client(timeout=120) as client:
            for k in range(requests + 3):
                history = full[: n - 3 + k]
                while history[-1].get("role") == "assistant" and history[-1].get("tool_calls"):
                    history = history[:-1]
                body = {"model": "gpt-4o", "messages": history}
                headers = {"x-salience-conversation": f"bench-{n}", "authorization": "Bearer sk-bench"}
                t0 = time.perf_counter()
                client.post(upstream.url + "/v1/chat/completions", json=body, headers=headers).raise_for_status()
                t1 = time.perf_counter()
                client.post(proxy.url + "/v1/chat/completions", json=body, headers=headers).raise_for_status()
                t2 = time.perf_counter()
                if k >= 3:  # the first calls warm the caches and the scorer
                    direct.append((t1 - t0) * 1000)
                    proxied.append((t2 - t1) * 1000)
            metrics = client.get(proxy.url + "/metrics").json()["chat"]
        diffs = [p - d for p, d in zip(proxied, direct)]
        rows.append({"messages": n, "requests": len(direct), "budget": budget,
                     "direct_p50_ms": pct(direct, 0.5), "direct_p99_ms": pct(direct, 0.99),
                     "proxied_p50_ms": pct(proxied, 0.5), "proxied_p99_ms": pct(proxied, 0.99),
                     "overhead_p50_ms": pct(diffs, 0.5), "overhead_p99_ms": pct(diffs, 0.99),
                     "overhead_mean_ms": statistics.fmean(diffs),
                     "proxy_own_p50_ms": metrics["latency_ms_p50"], "proxy_own_p99_ms": metrics["latency_ms_p99"]})
    return rows


def replay(runs: int, upstream: Served, share: float) -> dict[str, Any]:
    from salience.datasets.taubench import load

    path = ROOT.parent / "shared" / "data" / "tau-bench-airline" / "gpt-4o-airline.json"
    transcripts = load(path)[:runs]
    counter = default_counter()
    app = build_app(ProxyConfig(upstream=upstream.url, compactor=Compactor(on_over_budget="keep_pins")))
    steps = 0
    started = time.perf_counter()
    with Served(app) as proxy, httpx.Client(timeout=120) as client:
        for t in transcripts:
            messages = t.to_openai()
            for i, m in enumerate(messages):
                if m.get("role") != "assistant" or i < 2:
                    continue
                history = messages[:i]
                entries = Transcript.from_openai(history).entries
                system = sum(counter.count_entry(e) for e in entries if e.role == "system")
                rest = sum(counter.count_entry(e) for e in entries if e.role != "system")
                budget = max(1, system + int(rest * share))
                client.post(proxy.url + "/v1/chat/completions", json={"model": "gpt-4o", "messages": history},
                            headers={"x-salience-conversation": t.id, "x-salience-budget": str(budget)}
                            ).raise_for_status()
                steps += 1
        metrics = client.get(proxy.url + "/metrics").json()["chat"]
    return {"data": "tau-bench-airline", "runs": len(transcripts), "requests": steps, "share": share,
            "tokens_in": metrics["tokens_in"], "tokens_out": metrics["tokens_out"],
            "tokens_saved": metrics["tokens_saved"], "saved_share": metrics["tokens_saved"] / metrics["tokens_in"],
            "seconds": time.perf_counter() - started}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--requests", type=int, default=60)
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--share", type=float, default=0.25)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "out")
    args = parser.parse_args()
    upstream_app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])
    with Served(upstream_app) as upstream:
        rows = overhead(args.sizes, args.requests, upstream)
        print(f"{'messages':>8} {'direct p50':>10} {'p99':>7} {'proxied p50':>11} {'p99':>7} "
              f"{'overhead p50':>12} {'p99':>7} {'own p50':>8} {'p99':>7}  (ms)")
        for r in rows:
            print(f"{r['messages']:>8} {r['direct_p50_ms']:>10.2f} {r['direct_p99_ms']:>7.2f} "
                  f"{r['proxied_p50_ms']:>11.2f} {r['proxied_p99_ms']:>7.2f} {r['overhead_p50_ms']:>12.2f} "
                  f"{r['overhead_p99_ms']:>7.2f} {r['proxy_own_p50_ms']:>8.2f} {r['proxy_own_p99_ms']:>7.2f}")
        saved = replay(args.runs, upstream, args.share) if args.runs else None
    if saved:
        print(f"tau-bench airline replay: {saved['runs']} runs, {saved['requests']} requests, "
              f"{saved['tokens_in']:,} -> {saved['tokens_out']:,} tokens ({saved['saved_share']:.1%} saved) "
              f"at system + {saved['share']:.0%} of the rest, {saved['seconds']:.0f} s")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "proxy.json").write_text(json.dumps({"overhead": rows, "replay": saved}, indent=2) + "\n")


if __name__ == "__main__":
    main()
