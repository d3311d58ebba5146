"""Where the scorer never trained: leave one data set out (issue #14, item 1).

For each of the five shared tool-use sets (tau-bench airline, MINT, SWE-agent,
ToolTalk, API-Bank), a scorer is trained the way the README trains the bundled
default (``salience train <the other four> data/ --no-track --no-embeddings``: the
same ``train_scorer`` call, seed, 25% held-out split and features, without its
benchmark, which does not change the model) and evaluated on the set left out:

* ``salience``: ``Compactor(scorer=<that scorer>)`` with no other parameter, what a
  user gets, called on the OpenAI message list as a user calls it;
* ``salience, Anthropic messages``: the same Compactor handed each history as Anthropic
  messages (tool results in user messages, the system prompt beside them), as a Claude
  agent holds it, measured on the result as OpenAI messages
  (:func:`~salience.bench.independent.anthropic_compactor_selector`);
* ``default (in-domain)``: ``Compactor(scorer=default_scorer())``; the bundled scorer
  trained on every set, so this row is not unseen;
* ``constant scores``: the same Compactor fed one score (0.5) for every entry: what the
  selector's structure keeps (observations masked first, stubs, digests, pins, actions and
  user turns held) with no learned scores at all. ``salience − constant scores`` is what the
  learned scores add on a domain they never saw, with its bootstrap interval;
* the baselines of :mod:`salience.bench.independent`, each running as itself: the
  sliding window, value-stub masking, keep-last-10 observation masking, keep-last-3
  tool results; and ``window_billed``, the sliding window charged what the compactor
  charges (3 tokens a message and 3 a call beside the text), so that salience's default
  row can be compared with a window in its own unit as well as in the benchmark's (the
  ``salience, text tokens`` row).

Budgets are the system prompt plus 10% and 25% of the other tokens (``--fractions``).
Figures (:func:`salience.bench.independent.evaluate`): the independent reference
recall (micro and macro), ours (``salience bench``'s definition), the user-given
values, code support and actions kept (SWE-agent and MINT are where those mean
something), ``BudgetError`` counts (all, and those where the budget holds the
system prompt and the latest message, where issue #14 wants none) and over-budget counts. The trained scorers are cached
under ``benchmarks/out/lodo/``, keyed by a hash of the training files, the scorer
and training sources and the training parameters (``--retrain`` forces a new one).

Prints a table per held-out domain, one per figure across domains with the mean and
the worst, and salience minus the window per domain (three ways: salience − window,
salience counting text tokens − window, salience − the billed window); for the reference recalls
(independent and ours), each domain's difference carries a 95% paired percentile
bootstrap interval over transcripts (:func:`salience.bench.independent.paired_bootstrap`:
2,000 resamples of the held-out transcripts, seed 0; steps within a transcript are not
independent), and each fraction counts the domains whose lower bound is above 0 and
above the target, window + 0.10 (no interval on the mean: the domains are different
populations). Then, per definition, the ceiling of whole-message selection beside
salience and the target (:mod:`salience.bench.ceiling`: the best whole messages that fit,
knowing each step's references, as billed or in text tokens, with the latest message kept
or free to go; ``--no-ceiling`` skips it). Writes everything to ``benchmarks/out/unseen.json`` (the per-transcript
counts behind the intervals for the salience rows and the window only, each list on one
line). ``--track`` logs each held-out scorer's training run and its unseen figures to
MLflow (``salience.training.tracking``). ``--observations user`` hands the selectors MINT's
and SWE-agent's free-standing observations as the ``user`` turns their raw logs carry, not
as ``tool`` messages that answer no call (the references stay the same). Not part of the
tests. From the repository root::

    python benchmarks/bench_unseen.py [--data ../shared/data] [--max-steps 6] [--domains mint,swe-agent]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import platform
import re
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

try:
    import salience
except ImportError:  # running from a checkout without installing
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    import salience

import numpy as np
from rich.console import Console
from rich.table import Table

from salience import Compactor, ImportanceScorer, TokenCounter, Transcript, default_scorer, load_transcripts
from salience.bench.ceiling import DEFINITIONS, VARIANTS, Ceiling, ceilings
from salience.bench.independent import (
    OBSERVATIONS,
    IndependentReport,
    anthropic_compactor_selector,
    baseline_selectors,
    compactor_selector,
    evaluate,
    paired_bootstrap,
)

ROOT = Path(__file__).resolve().parents[1]


class TextTokens(TokenCounter):
    """cl100k tokens of an entry's text as the independent definition counts a message's
    (``salience.bench.references.message_text``: its content and each call's name and arguments,
    joined by newlines; a tool message's name left out), no overhead added: the benchmark's own
    units, so that a Compactor counting by it fits the budget its output is checked by. (The
    library's count adds each part's tokens, no newline between them: a call without content came
    to a token less, and 37 of AgentDojo slack's 86 steps went over the budget by a few tokens.)"""

    def __init__(self) -> None:
        super().__init__("cl100k_base", message_overhead=0, call_overhead=0)

    def count_entry(self, entry: Any) -> int:
        parts = [entry.content, *(part for call in entry.tool_calls for part in (call.name, call.arguments))]
        return self.count("\n".join(part for part in parts if part))


TEXT_TOKENS = TextTokens()
DOMAINS = ("tau-bench-airline", "mint", "swe-agent", "tooltalk", "api-bank")
OUT = ROOT / "benchmarks" / "out"
#: What the README's retraining command sets (salience train's defaults, --no-embeddings).
TRAIN_PARAMS: Mapping[str, Any] = {"seed": 0, "test_split": 0.25, "cv": 3, "label_mode": "auto", "embeddings": False}
#: The sources whose change retrains the held-out scorers.
SOURCES = ("src/salience/scorer", "src/salience/training/train.py", "src/salience/tokens.py", "src/salience/values.py",
           "src/salience/tooltypes.py")
SALIENCE = "salience"
#: The same Compactor counting the budget in the benchmark's own units (text tokens,
#: no per-message overhead), as the baselines do.
SAME_UNITS = "salience, text tokens"
#: The same Compactor handed each history as Anthropic messages (``--no-anthropic`` leaves it out).
ANTHROPIC = "salience, Anthropic messages"
DEFAULT = "default (in-domain)"
WINDOW = "window"
#: The Compactor fed one score for every entry (:class:`ConstantScores`): the selector's structure alone.
CONSTANT = "constant scores"
#: The same window charged what the compactor charges (the default counter's 3 tokens a
#: message and 3 a call beside the text): both sides of salience − window in one unit,
#: as billed; the text-token row does the same in the benchmark's units.
WINDOW_BILLED = "window_billed"
#: The differences the tables print: (method, baseline, summary key, label).
DELTAS: tuple[tuple[str, str, str, str], ...] = (
    (SALIENCE, WINDOW, "salience_minus_window", f"{SALIENCE} − window"),
    (SAME_UNITS, WINDOW, "salience_text_minus_window", f"{SAME_UNITS} − window"),
    (SALIENCE, WINDOW_BILLED, "salience_minus_billed_window", f"{SALIENCE} − window, billed"),
    (ANTHROPIC, WINDOW, "anthropic_minus_window", f"{ANTHROPIC} − window"),
    (SALIENCE, CONSTANT, "salience_minus_constant", f"{SALIENCE} − constant scores"),
)
#: The baselines that issue #14's target (``TARGET`` over them) is about.
WINDOWS = (WINDOW, WINDOW_BILLED)
LABELS = {name: label for _, _, name, label in DELTAS}
BASELINES = {name: baseline for _, baseline, name, _ in DELTAS}
#: Issue #14's target: salience above the window by this much in every held-out domain.
TARGET = 0.10
#: The paired bootstrap of salience − window, over transcripts.
BOOTSTRAP: Mapping[str, Any] = {"confidence": 0.95, "resamples": 2000, "seed": 0}
#: The figures whose differences get an interval, and the definition each counts.
INTERVALS = {"independent_micro": "independent", "ours_micro": "ours"}

console = Console(width=220)  # the delta tables carry an interval per domain


class ConstantScores:
    """One score, 0.5, for every entry: fed to the Compactor, it measures what the selector's
    structure keeps without any learned score (the ``constant scores`` row)."""

    def score(self, transcript: Transcript, query: str | None = None) -> np.ndarray:
        return np.full(len(transcript.entries), 0.5)

    def __repr__(self) -> str:
        return "ConstantScores()"


def note(text: str) -> None:
    console.print(f"[dim]{time.strftime('%H:%M:%S')}[/dim] {text}")


# --------------------------------------------------------------------------
# training, cached
# --------------------------------------------------------------------------


def _files(paths: Iterable[Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            out.extend(f for f in sorted(p.rglob("*")) if f.is_file() and "__pycache__" not in f.parts)
        elif p.is_file():
            out.append(p)
    return out


def training_key(inputs: Sequence[Path]) -> str:
    """A hash of the training files, the scorer and training sources, the parameters and the version."""
    h = hashlib.sha256()
    h.update(json.dumps({"params": dict(TRAIN_PARAMS), "version": salience.__version__}, sort_keys=True).encode())
    for base, files in (("data", _files(inputs)), ("src", _files(ROOT / s for s in SOURCES))):
        for f in files:
            h.update(f"{base}:{f.name}:{f.stat().st_size}\0".encode())
            h.update(f.read_bytes())
    return h.hexdigest()[:16]


def train_lodo(held_out: str, data: Path, retrain: bool) -> tuple[ImportanceScorer, dict[str, Any]]:
    """The scorer trained without ``held_out``: loaded from the cache, or trained and cached."""
    from salience.scorer.features import FeatureExtractor
    from salience.training.train import train_scorer

    inputs = [data / d for d in DOMAINS if d != held_out] + [ROOT / "data"]
    key = training_key(inputs)
    path = OUT / "lodo" / f"without-{held_out}-{key}.salience"
    info: dict[str, Any] = {"held_out": held_out, "inputs": [str(p) for p in inputs], "key": key, "path": str(path)}
    if path.exists() and not retrain:
        started = time.perf_counter()
        scorer = ImportanceScorer.load(path)
        info.update(cached=True, seconds=round(time.perf_counter() - started, 2))
        note(f"[{held_out}] scorer from the cache ({path.name}, {info['seconds']} s)")
        return scorer, info
    started = time.perf_counter()
    transcripts = load_transcripts([str(p) for p in inputs])
    note(f"[{held_out}] training on {len(transcripts):,} transcripts from {', '.join(p.name for p in inputs)}")
    path.parent.mkdir(parents=True, exist_ok=True)
    model = ImportanceScorer(features=FeatureExtractor(use_embeddings=TRAIN_PARAMS["embeddings"]),
                             cv=TRAIN_PARAMS["cv"], random_state=TRAIN_PARAMS["seed"])
    report = train_scorer(transcripts, out=path, seed=TRAIN_PARAMS["seed"], test_split=TRAIN_PARAMS["test_split"],
                          scorer=model, label_mode=TRAIN_PARAMS["label_mode"], cv=TRAIN_PARAMS["cv"], bench=False)
    info.update(cached=False, seconds=round(time.perf_counter() - started, 1), n_train=report.n_train,
                n_test=report.n_test, cv_metrics=report.cv_metrics)
    note(f"[{held_out}] trained in {info['seconds']} s on {report.n_train:,} transcripts; wrote {path.name}")
    return report.scorer, info


# --------------------------------------------------------------------------
# tables
# --------------------------------------------------------------------------

#: (key, title, getter) of each figure reported.
FIGURES: tuple[tuple[str, str], ...] = (
    ("independent_micro", "independent reference recall (micro)"),
    ("independent_macro", "independent reference recall (macro, per step)"),
    ("ours_micro", "ours: salience bench's reference recall (micro)"),
    ("user_given_micro", "user-given values (independent, micro)"),
    ("code_micro", "code support: copied lines and paths visible (micro)"),
    ("user_turns_micro", "user turns kept whole (share of the history's user messages)"),
    ("assistant_words_micro", "the assistant's own words kept whole (its plain messages, not its actions)"),
    ("actions_kept", "actions kept whole (share of the history's actions)"),
    ("fewer_references", "share of the steps where fewer independent references were visible than in the window's "
                         "output, at the same step and budget (a pooled recall can hide them)"),
    ("fewer_ours", "share of the steps where fewer of ours were visible than in the window's output"),
    ("fewer_actions", "steps where fewer actions were kept than by the window"),
    ("fewer_actions_billed", "steps where fewer actions were kept than by the window charged as billed (both sides "
                             "in one unit)"),
    ("budget_errors", "BudgetErrors (selector calls)"),
    ("budget_errors_fitting", "BudgetErrors where the system prompt and the latest message fit"),
    ("budget_errors_billed", "BudgetErrors where they fit as billed (the default counter's overheads, with the call "
                             "a latest result answers): what the compactor's contract promises"),
    ("empty_fitting", "empty lists returned where the system prompt and the latest message fit (no answer either)"),
    ("over_budget", "outputs over budget (selector calls)"),
)
#: The shares of steps below the window, by the definition each counts: figures only in their own summary tables
#: (the per-domain table is wide enough).
STEP_SHARES = {"fewer_references": "independent", "fewer_ours": "ours"}
SUMMARY_ONLY = set(STEP_SHARES)
COUNTS = {"fewer_actions", "fewer_actions_billed", "budget_errors",
          "budget_errors_fitting", "budget_errors_billed", "empty_fitting", "over_budget"}
#: Figures where more is worse: the counts, and the shares of steps below the window.
MORE_IS_WORSE = COUNTS | SUMMARY_ONLY


def figure(result: Mapping[str, Any], key: str) -> float:
    """One figure of a result dict (``MethodResult.to_dict()``); ``nan`` where undefined."""
    value: Any
    if key == "actions_kept":
        value = result["actions"]["share"]
    elif key in STEP_SHARES:
        name = STEP_SHARES[key]
        versus = result.get("fewer_than_reference")  # (absent from a report written before it was counted)
        steps = result[name]["steps"]
        value = versus[name]["steps"] / steps if versus is not None and steps else None
    elif key == "fewer_actions":
        value = result["actions"]["fewer_than_reference"] if result["actions"]["steps"] else None
    elif key == "fewer_actions_billed":
        value = result["actions"].get("fewer_than_second") if result["actions"]["steps"] else None
    elif key in COUNTS:
        value = result[key]
    else:
        name, _, kind = key.rpartition("_")
        value = result[name][kind]
    return math.nan if value is None else float(value)


def cell(value: float, key: str) -> str:
    if not math.isfinite(value):
        return "-"
    return f"{value:,.0f}" if key in COUNTS else f"{value:.3f}"


def pct(fraction: float) -> str:
    return f"{100 * fraction:g}%"


def domain_table(domain: str, report: Mapping[str, Any], fractions: Sequence[float]) -> Table:
    meta = report["meta"]
    table = Table(title=f"held out: {domain}", title_justify="left", caption_justify="left",
                  caption=f"{report['steps']:,} steps measured ({meta['independent_steps']:,} with independent "
                          f"references, {meta['ours_steps']:,} with ours, {meta['code_steps']:,} with code support) "
                          f"from {meta['transcripts']:,} transcripts; cells: "
                          + " / ".join(pct(f) for f in fractions))
    table.add_column("method", no_wrap=True)
    short = {"independent_micro": "indep.", "independent_macro": "indep.\nmacro", "ours_micro": "ours",
             "user_given_micro": "user-\ngiven", "code_micro": "code\nsupport", "user_turns_micro": "user\nturns",
             "assistant_words_micro": "assist.\nwords",
             "actions_kept": "actions\nkept",
             "fewer_actions": "fewer\nactions", "fewer_actions_billed": "fewer\nthan\nbilled",
             "budget_errors": "Budget-\nErrors",
             "budget_errors_fitting": "Budget-\nErrors,\nfloor fits",
             "budget_errors_billed": "Budget-\nErrors,\nfits\nbilled", "empty_fitting": "empty,\nfloor fits",
             "over_budget": "over\nbudget"}
    keys = [key for key, _ in FIGURES if key not in SUMMARY_ONLY]
    for key in keys:
        table.add_column(short[key], justify="right", no_wrap=True)
    by = _by_method(report)
    for method, results in by.items():
        cells = [" / ".join(cell(figure(results[f], key), key) for f in fractions) for key in keys]
        table.add_row(method, *cells, style="bold" if method in (SALIENCE, SAME_UNITS) else None)
    table.add_row("refs (steps); calls", *[
        " / ".join(_refs(next(iter(by.values()))[f], key)
                   for f in (fractions if key in ("budget_errors_fitting", "budget_errors_billed", "empty_fitting")
                             else fractions[:1]))
        for key in keys], style="dim")
    return table


def _refs(result: Mapping[str, Any], key: str) -> str:
    name = key.rpartition("_")[0]
    if name in ("independent", "ours", "user_given", "code", "user_turns", "assistant_words"):
        r = result[name]
        return f"{r['refs']:,} ({r['steps']:,})"
    if key == "actions_kept":
        return f"{result['actions']['total']:,} ({result['actions']['steps']:,})"
    if key in ("budget_errors_fitting", "empty_fitting"):
        return f"{result['fitting']:,}"
    return f"{result['calls']:,} calls"


def _by_method(report: Mapping[str, Any]) -> dict[str, dict[float, Mapping[str, Any]]]:
    out: dict[str, dict[float, Mapping[str, Any]]] = {}
    for r in report["results"]:
        out.setdefault(r["method"], {})[r["fraction"]] = r
    return out


def interval(report: Mapping[str, Any], method: str, fraction: float, definition: str,
             baseline: str = WINDOW) -> dict[str, Any] | None:
    """``method`` − ``baseline``'s (the window's) micro recall under ``definition`` in one domain's
    report, with its paired bootstrap interval over transcripts (``PairedDifference.to_dict()``);
    ``None`` where the report has no per-transcript counts or no transcript with references."""
    by = _by_method(report)
    if method not in by or baseline not in by:
        return None
    a, b = by[method][fraction].get("by_transcript"), by[baseline][fraction].get("by_transcript")
    if a is None or b is None:
        return None
    a, b = a[definition], b[definition]
    if a["refs"] != b["refs"]:
        raise ValueError(f"{method} and {baseline} were not scored on the same references")
    d = paired_bootstrap(a["seen"], b["seen"], a["refs"], **BOOTSTRAP)
    return d.to_dict() if d.transcripts else None


def summarise(reports: Mapping[str, Mapping[str, Any]], fractions: Sequence[float]) -> dict[str, Any]:
    """Per figure, method and fraction: the value per domain, the mean and the worst over
    the domains where it is defined; and salience minus the window, per domain, mean, worst,
    with (for the reference recalls) each domain's bootstrap interval (``ci``) and how many
    domains have its lower bound above 0 and above ``TARGET``."""
    out: dict[str, Any] = {}
    methods = list(dict.fromkeys(m for rep in reports.values() for m in _by_method(rep)))
    for key, _ in FIGURES:
        fig: dict[str, Any] = {}
        for method in methods:
            per_f: dict[str, Any] = {}
            for f in fractions:
                values = {d: figure(_by_method(rep)[method][f], key) for d, rep in reports.items()
                          if method in _by_method(rep)}
                finite = [v for v in values.values() if math.isfinite(v)]
                worst = (max if key in MORE_IS_WORSE else min)(finite) if finite else math.nan
                per_f[str(f)] = {"domains": {d: _json(v) for d, v in values.items()},
                                 "mean": _json(sum(finite) / len(finite) if finite else math.nan),
                                 "worst": _json(worst),
                                 "worst_domain": next((d for d, v in values.items() if v == worst), None)}
            fig[method] = per_f
        for method, baseline, name, _ in DELTAS:
            if key in MORE_IS_WORSE or method not in fig or baseline not in fig:
                continue
            delta: dict[str, Any] = {}
            for f in fractions:
                s, w = fig[method][str(f)]["domains"], fig[baseline][str(f)]["domains"]
                diffs = {d: s[d] - w[d] for d in s if s[d] is not None and w.get(d) is not None}
                delta[str(f)] = {"domains": diffs,
                                 "mean": sum(diffs.values()) / len(diffs) if diffs else None,
                                 "worst": min(diffs.values()) if diffs else None,
                                 "worst_domain": min(diffs, key=lambda d: diffs[d]) if diffs else None}
                if key in INTERVALS:
                    cis = {d: interval(reports[d], method, f, INTERVALS[key], baseline) for d in diffs}
                    lows = {d: ci["low"] for d, ci in cis.items() if ci is not None and ci["low"] is not None}
                    delta[str(f)].update(
                        ci=cis, ci_domains=len(lows),
                        lower_above_0=sorted(d for d, low in lows.items() if low > 0),
                        lower_above_target=sorted(d for d, low in lows.items() if low > TARGET))
            fig[name] = delta
        out[key] = fig
    return out


def one_line_lists(text: str) -> str:
    """Indented JSON with every list of integers on one line (the per-transcript counts); the
    newlines it matches cannot be inside a JSON string."""
    return re.sub(r"\[\n\s*-?\d+(?:,\n\s*-?\d+)*\n\s*\]",
                  lambda m: re.sub(r"\s+", "", m.group()).replace(",", ", "), text)


def _json(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def summary_table(key: str, title: str, summary: Mapping[str, Any], domains: Sequence[str],
                  fractions: Sequence[float]) -> Table:
    fig = summary[key]
    worst_word = "most" if key in MORE_IS_WORSE else "worst"
    caption = "cells: " + " / ".join(pct(f) for f in fractions)
    first = fig.get("salience_minus_window", {}).get(str(fractions[0]), {})
    if "ci" in first:
        caption += (f"; CI: {BOOTSTRAP['confidence']:.0%} paired percentile bootstrap over the transcripts with "
                    f"references (" + ", ".join(f"{d} {ci['transcripts']:,}" for d, ci in first["ci"].items()
                                                if ci is not None)
                    + f"), {BOOTSTRAP['resamples']:,} resamples; over few transcripts it understates the spread")
    table = Table(title=f"{title}: per held-out domain, mean and {worst_word}", title_justify="left",
                  caption=caption, caption_justify="left")
    table.add_column("method", no_wrap=True)
    for d in domains:
        table.add_column(d, justify="right", no_wrap=True)
    table.add_column("mean", justify="right", no_wrap=True)
    table.add_column(worst_word, justify="right", no_wrap=True)

    def fmt(v: Any) -> str:
        return cell(math.nan if v is None else float(v), key)

    def signed(v: Any) -> str:
        return "-" if v is None else f"{v:+.3f}"

    for method, per_f in fig.items():
        delta = method in LABELS
        show = signed if delta else fmt
        row = [" / ".join(show(per_f[str(f)]["domains"].get(d)) for f in fractions) for d in domains]
        row.append(" / ".join(show(per_f[str(f)]["mean"]) for f in fractions))
        row.append(" / ".join(show(per_f[str(f)]["worst"]) for f in fractions))
        label = LABELS.get(method, method)
        table.add_row(label, *row, style="bold" if method in (SALIENCE, SAME_UNITS) or delta else None)
        for f in fractions if delta else ():
            ci_row = ci_cells(per_f[str(f)], domains, target=BASELINES[method] in WINDOWS)
            if ci_row is not None:
                table.add_row(f"  {pct(f)}, {100 * BOOTSTRAP['confidence']:g}% CI", *ci_row, style="dim")
    return table


def ceiling_table(definition: str, ceils: Mapping[str, Mapping[str, Any]], summary: Mapping[str, Any],
                  domains: Sequence[str], fractions: Sequence[float]) -> Table:
    """The ceiling of whole-message selection (:mod:`salience.bench.ceiling`) per held-out
    domain beside salience, the window and the target (window + ``TARGET``), one definition."""
    fig = summary[f"{definition}_micro"]
    table = Table(title=f"{definition}: the best whole messages, knowing the references (a ceiling for whole "
                        f"messages, not for trims, stubs or digests)", title_justify="left",
                  caption="cells: " + " / ".join(pct(f) for f in fractions), caption_justify="left")
    table.add_column("row", no_wrap=True)
    for d in domains:
        table.add_column(d, justify="right", no_wrap=True)

    def recall(d: str, variant: str, f: float) -> str:
        value = ceils.get(d, {}).get(definition, {}).get(variant, {}).get(f"{f:g}", {}).get("micro")
        return "-" if value is None else f"{value:.3f}"

    def method(name: str, d: str, f: float, plus: float = 0.0) -> str:
        value = fig.get(name, {}).get(str(f), {}).get("domains", {}).get(d)
        return "-" if value is None else f"{value + plus:.3f}"

    for variant, _, _ in VARIANTS:
        table.add_row(f"ceiling, {variant}", *(" / ".join(recall(d, variant, f) for f in fractions) for d in domains))
    table.add_row(SALIENCE, *(" / ".join(method(SALIENCE, d, f) for f in fractions) for d in domains), style="bold")
    table.add_row(f"target (window + {TARGET:.2f})",
                  *(" / ".join(method(WINDOW, d, f, TARGET) for f in fractions) for d in domains))
    return table


def ci_cells(delta: Mapping[str, Any], domains: Sequence[str], target: bool = True) -> list[str] | None:
    """A delta's per-domain ``+0.099 [+0.061, +0.140]`` cells, then how many domains have the
    lower bound above 0 and (``target``: a difference over a window) above the target, in the
    mean and worst columns; ``None`` without intervals."""
    if "ci" not in delta:
        return None

    def text(ci: Mapping[str, Any] | None) -> str:
        if ci is None:
            return "-"
        low, high = (("-" if ci[k] is None else f"{ci[k]:+.3f}") for k in ("low", "high"))
        return f"{ci['difference']:+.3f} [{low}, {high}]"

    n = delta["ci_domains"]
    return [text(delta["ci"].get(d)) for d in domains] + [
        f"low > 0: {len(delta['lower_above_0'])} of {n}",
        f"low > +{TARGET:.2f}: {len(delta['lower_above_target'])} of {n}" if target else ""]


def ci_notes(summary: Mapping[str, Any], fractions: Sequence[float]) -> list[str]:
    """Per reference figure, row and fraction, the domains whose interval's lower bound is
    above 0 and above the target."""
    lines = []
    for key, definition in INTERVALS.items():
        for _, baseline, name, label in DELTAS:
            for f in fractions:
                delta = summary.get(key, {}).get(name, {}).get(str(f))
                if not delta or "ci" not in delta:
                    continue
                line = (f"{label}, {definition}, at {pct(f)}: {BOOTSTRAP['confidence']:.0%} lower "
                        f"bound above 0 in {len(delta['lower_above_0'])} of {delta['ci_domains']} domains "
                        f"({', '.join(delta['lower_above_0']) or 'none'})")
                if baseline in WINDOWS:
                    line += (f", above +{TARGET:.2f} in {len(delta['lower_above_target'])} "
                             f"({', '.join(delta['lower_above_target']) or 'none'})")
                lines.append(line)
    return lines


# --------------------------------------------------------------------------
# tracking
# --------------------------------------------------------------------------


def track(scorer: ImportanceScorer, info: Mapping[str, Any], report: IndependentReport,
          fractions: Sequence[float], max_steps: int | None, ceiling: Ceiling | None = None) -> str | None:
    """Log the held-out scorer's training run, with its unseen figures (and the ceiling of
    whole-message selection, when measured), and register it."""
    from salience.training.tracking import log_training_run

    metrics = {f"train_{k}": float(v) for k, v in (info.get("cv_metrics") or {}).items()
               if isinstance(v, (int, float)) and math.isfinite(v)}
    metrics.update(report.metrics(prefix="unseen_"))
    if ceiling is not None:
        metrics.update(ceiling.metrics(prefix="unseen_"))
    record = log_training_run(
        scorer, name=f"salience-lodo-{info['held_out']}",
        params={"held_out": info["held_out"], "inputs": ",".join(info["inputs"]), "training_key": info["key"],
                "fractions": ",".join(str(f) for f in fractions), "max_steps": max_steps,
                **{k: v for k, v in TRAIN_PARAMS.items()}},
        metrics=metrics, model_path=info["path"], tags={"benchmark": "bench_unseen"})
    return str(record.model_uri)


# --------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------


def _fractions(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"fractions must be numbers separated by commas (got {text!r})") from None
    if not values or not all(0 < f <= 1 for f in values):
        raise argparse.ArgumentTypeError(f"each fraction must be in (0, 1] (got {text!r})")
    return values


def _domains(text: str) -> tuple[str, ...]:
    names = tuple(d.strip() for d in text.split(",") if d.strip())
    unknown = [d for d in names if d not in DOMAINS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown domain {unknown[0] if unknown else text!r}; "
                                         f"expected some of {', '.join(DOMAINS)}")
    return names


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data",
                        help="the shared data folder (default: ../shared/data from the repository root)")
    parser.add_argument("--domains", type=_domains, default=DOMAINS,
                        help=f"held-out domains, comma-separated (default: all of {','.join(DOMAINS)})")
    parser.add_argument("--fractions", type=_fractions, default=(0.10, 0.25),
                        help="budgets over the system prompt, as shares of the other tokens (default 0.1,0.25)")
    parser.add_argument("--max-steps", type=int, default=6,
                        help="at most this many steps per transcript, evenly spread (default 6; 0: all)")
    parser.add_argument("--retrain", action="store_true", help="train the held-out scorers even when cached")
    parser.add_argument("--no-default", action="store_true", help="leave out the bundled default scorer's row")
    parser.add_argument("--no-ceiling", action="store_true",
                        help="skip the ceiling of whole-message selection (salience.bench.ceiling; ~2 min)")
    parser.add_argument("--track", action="store_true",
                        help="log each held-out scorer's training run and unseen figures to MLflow")
    parser.add_argument("--observations", choices=OBSERVATIONS, default="tool",
                        help="hand the selectors each free-standing observation (MINT's, SWE-agent's older runs') "
                             "as a tool message, the loaders' form (default), or as the user turn its raw log "
                             "carries; the references and measures stay the same")
    parser.add_argument("--no-anthropic", dest="anthropic", action="store_false",
                        help=f"leave out the row {ANTHROPIC!r}: the same Compactor handed each history as Anthropic "
                             "messages (tool results in user messages), as a Claude agent holds it")
    parser.add_argument("--out", type=Path, default=OUT / "unseen.json", help="the JSON report to write")
    args = parser.parse_args(argv)
    max_steps = args.max_steps or None
    missing = [d for d in DOMAINS if not (args.data / d).exists()]
    if missing:
        parser.error(f"data sets not found under {args.data}: {', '.join(missing)} (use --data)")
    started = time.perf_counter()
    timings: dict[str, Any] = {"train": {}, "load": {}, "evaluate": {}, "selectors": {}, "ceiling": {}}
    ceils: dict[str, dict[str, Any]] = {}
    scorers: dict[str, ImportanceScorer] = {}
    infos: dict[str, dict[str, Any]] = {}
    for d in args.domains:  # training first: the slow part, and cached
        scorers[d], infos[d] = train_lodo(d, args.data, args.retrain)
        timings["train"][d] = infos[d]["seconds"]
    bundled = None if args.no_default else default_scorer()
    reports: dict[str, dict[str, Any]] = {}
    tracked: dict[str, str | None] = {}
    for d in args.domains:
        t0 = time.perf_counter()
        transcripts: list[Transcript] = load_transcripts(args.data / d)
        timings["load"][d] = round(time.perf_counter() - t0, 2)
        selectors: dict[str, Any] = {
            SALIENCE: compactor_selector(Compactor(scorer=scorers[d])),
            SAME_UNITS: compactor_selector(Compactor(scorer=scorers[d], counter=TEXT_TOKENS)),
        }
        if args.anthropic:
            selectors[ANTHROPIC] = anthropic_compactor_selector(Compactor(scorer=scorers[d]))
        if bundled is not None:
            selectors[DEFAULT] = compactor_selector(Compactor(scorer=bundled))
        selectors[CONSTANT] = compactor_selector(Compactor(scorer=ConstantScores()))
        baselines = baseline_selectors()
        selectors[WINDOW] = baselines.pop(WINDOW)
        selectors[WINDOW_BILLED] = baselines.pop(WINDOW_BILLED)
        selectors.update(baselines)
        t0 = time.perf_counter()
        report = evaluate(transcripts, selectors, args.fractions, max_steps=max_steps, reference=WINDOW,
                          second_reference=WINDOW_BILLED, progress=True, description=f"[{d}] steps",
                          observations=args.observations)
        timings["evaluate"][d] = round(time.perf_counter() - t0, 1)
        per_method: dict[str, float] = {}
        for r in report.results:
            per_method[r.method] = round(per_method.get(r.method, 0.0) + r.seconds, 2)
        timings["selectors"][d] = per_method
        reports[d] = report.to_dict()
        note(f"[{d}] {report.steps:,} steps from {len(transcripts):,} transcripts in {timings['evaluate'][d]} s "
             f"(load {timings['load'][d]} s; inside selectors: "
             + ", ".join(f"{m} {s:.1f} s" for m, s in per_method.items()) + ")")
        console.print(domain_table(d, reports[d], args.fractions))
        ceiling = None
        if not args.no_ceiling:
            t0 = time.perf_counter()
            ceiling = ceilings(transcripts, args.fractions, max_steps=max_steps)
            ceils[d] = ceiling.to_dict()
            timings["ceiling"][d] = round(time.perf_counter() - t0, 1)
            note(f"[{d}] ceiling of whole-message selection in {timings['ceiling'][d]} s")
        if args.track:
            try:
                tracked[d] = track(scorers[d], infos[d], report, args.fractions, max_steps, ceiling)
                note(f"[{d}] logged to MLflow: {tracked[d]}")
            except Exception as exc:  # tracking is optional: report and carry on
                tracked[d] = None
                note(f"[{d}] tracking failed: {type(exc).__name__}: {exc}")
    summary = summarise(reports, args.fractions)
    for key, title in FIGURES:
        console.print(summary_table(key, title, summary, list(args.domains), args.fractions))
    for definition in DEFINITIONS if ceils else ():
        console.print(ceiling_table(definition, ceils, summary, list(args.domains), args.fractions))
    for line in ci_notes(summary, args.fractions):
        note(line)
    timings["total"] = round(time.perf_counter() - started, 1)
    timings["total_without_training"] = round(timings["total"] - sum(
        v for d, v in timings["train"].items() if not infos[d]["cached"]), 1)
    note("timings (s): " + ", ".join(f"{phase} {json.dumps(value)}" for phase, value in timings.items()))
    out = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "salience_version": salience.__version__, "python": platform.python_version(),
        "args": {"data": str(args.data), "domains": list(args.domains), "fractions": list(args.fractions),
                 "max_steps": max_steps, "retrain": args.retrain, "no_default": args.no_default,
                 "no_ceiling": args.no_ceiling, "observations": args.observations, "anthropic": args.anthropic},
        "methods": {SALIENCE: "Compactor(scorer=<trained without the held-out set>), no other parameter",
                    SAME_UNITS: "the same, with counter=TokenCounter(message_overhead=0, call_overhead=0): the "
                                "budget counted in text tokens, the benchmark's units (the default counter adds "
                                "3 tokens per message and 3 per call that the baselines are not charged)",
                    ANTHROPIC: "the salience row's Compactor handed each history as Anthropic messages "
                               "(Transcript.from_openai(history).to_anthropic(), its system prompt as system), "
                               "measured on the result as OpenAI messages",
                    DEFAULT: "Compactor(scorer=default_scorer()): trained on every set, so in-domain",
                    CONSTANT: "Compactor(scorer=ConstantScores()): 0.5 for every entry, the selector's "
                              "structure without learned scores (salience − constant scores: what they add)",
                    **{m: "baseline, salience.bench.independent" for m in baseline_selectors()},
                    WINDOW_BILLED: "the sliding window charged as billed (3 tokens a message and 3 a call beside "
                                   "the text, what the compactor counts): salience − window, billed compares "
                                   "both in one unit"},
        "training": {d: {k: v for k, v in infos[d].items()} for d in args.domains},
        "bootstrap": {**BOOTSTRAP, "method": "percentile, paired", "unit": "transcript", "target": TARGET},
        "tracked": tracked, "timings": timings, "domains": reports, "summary": summary, "ceilings": ceils,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for domain_report in reports.values():  # the counts behind the intervals; the others' would only weigh
        for r in domain_report["results"]:
            if r["method"] not in (SALIENCE, SAME_UNITS, ANTHROPIC, DEFAULT, CONSTANT, WINDOW, WINDOW_BILLED):
                r.pop("by_transcript", None)
    args.out.write_text(one_line_lists(json.dumps(out, indent=1, default=str)) + "\n", encoding="utf-8")
    note(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
