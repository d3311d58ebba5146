"""``salience proxy``: serve the compaction proxy (:mod:`salience.adapters.proxy`).

Usage::

    salience proxy --upstream URL [--host 127.0.0.1] [--port 8787] [--budget N|P%] [--window N]
                   [--scorer S] [--profile FILE] [--log-content] [--restore-tool]
                   [--trigger F] [--min-removal F] [--restart-gain F] [--cache-min N]
                   [--max-depth N] [--max-bytes SIZE] [--max-entries N]

``--budget`` is tokens, or a share of the model's context window (``--window``, else by
model name); a request header ``x-salience-budget`` overrides it per request. The
``--max-*`` limits (every command that reads input has them, :mod:`salience.limits`)
bound each request body: a larger one gets a 413, a deeper or longer one a 400.
``--restore-tool`` adds the restore tool to each compacted request and answers the
model's calls to it; a streaming request then reaches the client once the upstream's
last round has finished (what is supported: :mod:`salience.adapters._proxy_restore`).
``--trigger`` and ``--min-removal`` are each conversation's session's
(:meth:`salience.Compactor.session`): it compacts once a request passes the system prompt
plus ``--trigger`` of the budget above it, frees ``--min-removal`` of that room more, and
starts over where an answer from scratch is worth ``--restart-gain`` more than its earlier
decisions allow; below ``--cache-min`` tokens of room it compacts each request afresh.
"""

from __future__ import annotations

import argparse
import logging
import sys

from salience.cli.compaction import read_profile, resolve_scorer
from salience.cli.scorers import add_scorer_argument
from salience.errors import SalienceError
from salience.selector.session import CACHE_MIN, RESTART_GAIN

__all__ = ["add_parser", "run"]


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:  # type: ignore[type-arg]
    parser = subparsers.add_parser(
        "proxy", help="an OpenAI- and Anthropic-compatible HTTP proxy that compacts each request",
        description="Serve an HTTP proxy for /v1/chat/completions, /v1/responses and /v1/messages that compacts "
                    "each request's history to a token budget and forwards it to --upstream. Needs "
                    "pip install \"salience[proxy]\".")
    parser.add_argument("--upstream", required=True, help="base URL of the API, e.g. https://api.anthropic.com")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8787, help="port to listen on (default: 8787)")
    parser.add_argument("--budget", default=None,
                        help="tokens per request, or a share of the model's window such as 50%%")
    parser.add_argument("--window", type=int, default=None,
                        help="the model's context window in tokens, for a --budget share (default: by model name)")
    add_scorer_argument(parser)
    parser.add_argument("--profile", default=None, help="a tuned profile (salience tune) for the compactor")
    parser.add_argument("--log-content", action="store_true",
                        help="log what is sent upstream (prompt content; off by default)")
    parser.add_argument("--restore-tool", action="store_true",
                        help="add the restore tool (salience_restore) to each compacted request and answer the "
                             "model's calls to it inside the proxy, from the archive of that request's compaction "
                             "(a streaming request is then read from the upstream to its end before it is sent on)")
    parser.add_argument("--trigger", type=float, default=1.0,
                        help="compact once a request passes the system prompt plus this share of the budget above it "
                             "(default: 1.0)")
    parser.add_argument("--min-removal", type=float, default=0.1,
                        help="and free this share of that room more, so the next requests append to the cached "
                             "prefix (default: 0.1)")
    parser.add_argument("--restart-gain", type=float, default=RESTART_GAIN,
                        help="compact from scratch (the cached prefix given up once) where that is worth this share "
                             f"more than keeping earlier decisions (default: {RESTART_GAIN})")
    parser.add_argument("--cache-min", type=int, default=CACHE_MIN,
                        help="below this many tokens of room above the system prompt, compact each request afresh "
                             f"at the budget: too short a prefix to be worth keeping stable (default: {CACHE_MIN}; "
                             "0: always keep it)")
    parser.set_defaults(handler=run)
    return parser


def run(args: argparse.Namespace) -> int:
    try:
        import uvicorn

        from salience.adapters.proxy import ProxyConfig, build_app, parse_budget, window_note
    except ImportError as exc:
        raise SalienceError(f'salience proxy needs its extra: pip install "salience[proxy]" ({exc})') from None
    if not args.upstream.startswith(("http://", "https://")):
        raise SalienceError(f"--upstream must be an http:// or https:// URL (got {args.upstream!r})")
    if not 0 < args.port < 65536:
        raise SalienceError(f"--port must be between 1 and 65535 (got {args.port})")
    tokens, share = parse_budget(args.budget) if args.budget is not None else (None, None)
    if args.window is not None and args.window < 1:
        raise SalienceError(f"--window must be a positive number of tokens (got {args.window})")
    scorer, note = resolve_scorer(args.scorer)
    profile = read_profile(args.profile)
    from salience.selector.compactor import Compactor

    compactor = Compactor(scorer=scorer, profile=profile, on_over_budget="keep_pins")
    config = ProxyConfig(upstream=args.upstream, compactor=compactor, budget=tokens, budget_share=share,
                         window=args.window, log_content=args.log_content, restore_tool=args.restore_tool,
                         trigger=args.trigger, min_removal=args.min_removal, restart_gain=args.restart_gain,
                         cache_min=args.cache_min)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    if note:
        print(f"salience: warning: {note}", file=sys.stderr)
    limits = config.limits
    print(f"salience proxy: http://{args.host}:{args.port} -> {args.upstream} ({window_note(config)}; bodies of at "
          f"most {limits.max_bytes:,} bytes, {limits.max_entries:,} messages, nested {limits.max_depth} deep)",
          file=sys.stderr)
    app = build_app(config)  # (a bad --trigger, --min-removal, --restart-gain or --cache-min fails here: exit code 2)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", access_log=False)
    return 0
