"""Embedding throughput: 1,000 realistic entries cold, then cached (memory and disk).

Run as a script (``python benchmarks/bench_embeddings.py [--n 1000] [--threads 2,1]``)
or with pytest (``pytest benchmarks/bench_embeddings.py -s``). Not part of the
default test run.

Entries are the distinct non-blank entry texts of the tau-bench airline runs in
``../shared/data`` (system prompts, user turns, assistant turns, tool calls and
JSON tool results, as :func:`salience.scorer.text.entry_text` renders them); when
that data is absent, synthetic entries of the same kinds and lengths stand in.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from salience.scorer.embeddings import Embedder, _load_model

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
TAU = SHARED / "tau-bench-airline" / "gpt-4o-airline.json"


def _tau_texts() -> list[str]:
    runs = json.loads(TAU.read_text(encoding="utf-8"))
    texts: list[str] = []
    for run in runs:
        for msg in run["traj"]:
            parts = [msg.get("content") or ""]
            for call in msg.get("tool_calls") or []:
                fn = call.get("function", {})
                parts.append(f"{fn.get('name')}({fn.get('arguments')})")
            text = "\n".join(p for p in parts if p)
            if msg.get("role") == "tool" and msg.get("name"):
                text = f"{msg['name']}: {text}"
            texts.append(text)
    return texts


def _synthetic_texts(n: int) -> list[str]:
    rng = random.Random(0)
    words = "flight refund booking seat baggage cancel upgrade economy business payment card gift".split()
    out = []
    for i in range(n):
        kind = i % 4
        if kind == 0:
            out.append(f"I need to {rng.choice(words)} my {rng.choice(words)} for reservation R{i:05d}, please.")
        elif kind == 1:
            out.append(f'get_reservation_details({{"reservation_id": "R{i:05d}"}})')
        elif kind == 2:
            items = [{"flight": f"HAT{rng.randint(100, 999)}", "price": rng.randint(50, 900)} for _ in range(12)]
            out.append("get_reservation_details: " + json.dumps({"reservation_id": f"R{i:05d}", "flights": items}))
        else:
            out.append(" ".join(rng.choice(words) for _ in range(rng.randint(10, 80))) + f" (case {i})")
    return out


def realistic_texts(n: int) -> tuple[list[str], str]:
    """``n`` distinct non-blank entry texts and where they came from."""
    source = "synthetic"
    pool: list[str] = []
    if TAU.is_file():
        pool = _tau_texts()
        source = f"tau-bench airline ({TAU.name})"
    distinct = list(dict.fromkeys(t for t in pool if t.strip()))
    random.Random(0).shuffle(distinct)
    if len(distinct) < n:
        distinct += _synthetic_texts(n - len(distinct))
    return distinct[:n], source


def run(n: int = 1_000, threads: tuple[int | None, ...] = (None, 1)) -> dict[str, float]:
    texts, source = realistic_texts(n)
    lengths = [len(t) for t in texts]
    print(
        f"{n} texts from {source}: chars median {statistics.median(lengths):.0f}, "
        f"mean {statistics.mean(lengths):.0f}, max {max(lengths)} (cut to 2,000)"
    )
    start = time.perf_counter()
    _load_model(Embedder().resolved_path, "cpu")
    results = {"model_load_s": time.perf_counter() - start}
    print(f"model load (import + weights): {results['model_load_s']:.2f} s")
    Embedder(num_threads=1).encode(["warm-up text"])

    for nt in threads:
        label = "torch default threads" if nt is None else f"{nt} thread(s)"
        with tempfile.TemporaryDirectory() as tmp:
            emb = Embedder(cache_dir=tmp, num_threads=nt)
            start = time.perf_counter()
            emb.encode(texts)
            cold = time.perf_counter() - start
            start = time.perf_counter()
            emb.encode(texts)
            warm = time.perf_counter() - start
            reader = Embedder(cache_dir=tmp)
            start = time.perf_counter()
            reader.encode(texts)
            disk = time.perf_counter() - start
            assert reader.cache_info().misses == 0
        key = "default" if nt is None else f"t{nt}"
        results[f"cold_texts_per_s_{key}"] = n / cold
        results[f"cached_s_{key}"] = warm
        results[f"disk_s_{key}"] = disk
        print(
            f"[{label}] cold: {cold:.2f} s = {n / cold:.0f} texts/s | memory-cached re-encode: "
            f"{warm * 1e3:.1f} ms | new instance from disk cache: {disk * 1e3:.1f} ms"
        )
    return results


def test_embedding_throughput() -> None:
    results = run(1_000)
    assert results["cold_texts_per_s_default"] > 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000, help="number of entries (default 1000)")
    parser.add_argument(
        "--threads", default="default,1", help="comma-separated torch thread counts; 'default' = leave torch's setting"
    )
    args = parser.parse_args(argv)
    threads = tuple(None if t == "default" else int(t) for t in args.threads.split(","))
    run(args.n, threads)
    return 0


if __name__ == "__main__":
    sys.exit(main())
