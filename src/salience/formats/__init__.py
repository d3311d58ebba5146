"""Old home of the formats, kept for one release: import from the new packages instead.

``salience.formats`` held two kinds of module, now apart: the provider message
converters (``openai``, ``anthropic``) are in :mod:`salience.messages`, the read-only
data set loaders (``jsonl``, ``locomo``, ``taubench``, ``mint``, ``sweagent``,
``tooltalk``, ``apibank``) and :func:`load_transcripts` in :mod:`salience.datasets`.
This package and its modules (``salience.formats.openai``, ...) only re-export the
names they had.
"""

from __future__ import annotations

from salience.datasets import (
    LAYOUTS,
    PathLike,
    detect_layout,
    iter_files,
    known_layouts,
    load_transcripts,
    save_transcripts,
)

__all__ = [
    "LAYOUTS",
    "PathLike",
    "detect_layout",
    "iter_files",
    "known_layouts",
    "load_transcripts",
    "save_transcripts",
]
