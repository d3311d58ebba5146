"""One hash of many compactions, to check that a speed change left every output as it was.

The first 25 transcripts of each of the five shared tool-use sets, each cut into growing
prefixes (every fifth of its messages), each prefix compacted by one ``Compactor()`` with
its defaults at 10%, 25% and 50% of its tokens (cl100k over the message text) plus 50; the
hash covers the messages, the kept / trimmed / stubbed / dropped ids and the archive's
ids, or the ``BudgetError``'s text. A second line hashes the default scorer's scores
(their bytes) on the first 20 transcripts of the same sets and of LoCoMo, each scored
cold, which a speed change in the scorer must leave bit-identical. Run it before and
after a change: the lines must be the same (1,935 compactions, ``6e28b565...``, on
``main`` at the thirteenth session). Not part of the tests::

    python benchmarks/compaction_hash.py [--data ../shared/data]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
try:
    import salience  # noqa: F401
except ImportError:  # running from a checkout without installing
    sys.path.insert(0, str(ROOT / "src"))

from salience import BudgetError, Compactor, load_transcripts  # noqa: E402
from salience.bench.independent import messages_tokens  # noqa: E402

SETS = ("tau-bench-airline", "mint", "swe-agent", "tooltalk", "api-bank")


def compaction_hash(data: Path, per_set: int = 25) -> tuple[int, str]:
    """``(compactions, sha256)`` over the compactions described in the module doc."""
    compactor = Compactor()
    digest = hashlib.sha256()
    n = 0
    for name in SETS:
        for transcript in load_transcripts(data / name)[:per_set]:
            messages = transcript.to_openai()
            step = max(1, len(messages) // 5)
            for k in range(step, len(messages) + 1, step):
                prefix = messages[:k]
                total = messages_tokens(prefix)
                for fraction in (0.1, 0.25, 0.5):
                    try:
                        r = compactor.compact(prefix, budget=int(total * fraction) + 50)
                        out: object = [r.messages, r.kept, r.trimmed, r.stubbed, r.dropped, sorted(r.archive)]
                    except BudgetError as exc:
                        out = str(exc)
                    digest.update(json.dumps(out, sort_keys=True, default=str).encode())
                    n += 1
    return n, digest.hexdigest()


def score_hash(data: Path, per_set: int = 20) -> tuple[int, str]:
    """``(transcripts, sha256)`` of the default scorer's scores, each transcript scored cold."""
    import numpy as np

    from salience import default_scorer

    scorer = default_scorer()
    digest = hashlib.sha256()
    n = 0
    for name in (*SETS, "locomo"):
        for transcript in load_transcripts(data / name)[:per_set]:
            scorer.features_.clear_cache()
            digest.update(np.ascontiguousarray(scorer.score(transcript), dtype=np.float64).tobytes())
            n += 1
    return n, digest.hexdigest()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    args = parser.parse_args(argv)
    missing = [s for s in SETS if not (args.data / s).exists()]
    if missing:
        parser.error(f"data sets not found under {args.data}: {', '.join(missing)} (use --data)")
    n, hexdigest = compaction_hash(args.data)
    print(n, hexdigest)
    if (args.data / "locomo").exists():
        n, hexdigest = score_hash(args.data)
        print("scores", n, hexdigest)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
