"""Read-only loaders of the data sets salience learns from, and canonical JSONL.

:func:`load_transcripts` takes files or folders and detects each file's layout
from its content. Each layout is a module here with ``NAME``, ``sniff(path, head)``
and ``load(path)``; :data:`LAYOUTS` lists them in detection order::

    jsonl.py      canonical JSONL, salience's own layout (also written: save_transcripts)
    locomo.py     LoCoMo long conversations, with their questions and evidence
    taubench.py   tau-bench trajectories (OpenAI chat messages)
    mint.py       MINT benchmark outputs (results.jsonl)
    sweagent.py   SWE-agent trajectories (.traj)
    tooltalk.py   ToolTalk conversations
    apibank.py    API-Bank dialogues
    _io.py        what the loaders share: reading JSON and JSON lines

Only canonical JSONL is written; the others are read. The two-way converters of
provider message lists (OpenAI, Anthropic) are :mod:`salience.messages`.

An empty file holds no transcript (whatever its name). Errors: a path that does
not exist, or a non-empty file named directly that no layout recognises, is a
:class:`~salience.errors.FormatError` naming the file (one that starts like a JSON
document and does not parse says so: ``<file>: not valid JSON: line L, column C:
<reason>``); what a loader finds wrong
inside a file is its own :class:`~salience.errors.TranscriptError`; any other
exception a loader raises (a ``KeyError`` deep inside a malformed file, say) comes
out as a ``FormatError`` naming the file and the layout, the original chained as
its cause.

Every loader reads within :mod:`salience.limits` (a JSON file or JSON line of at most
``max_bytes``, nested at most ``max_depth``; at most ``max_entries`` entries per
transcript): past them, a :class:`~salience.errors.LimitError` naming the file. A
transcript whose tool call is not answered before the next entry that is not one of
its results is refused as the provider readers refuse it
(:func:`salience.messages.validate.require_answered`). ``NaN``, ``Infinity`` and
``-Infinity`` are refused with a ``FormatError`` naming the file, the line, the column
and the field (JSON has none of them; see :mod:`salience.datasets._io`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Union

import salience.datasets.apibank as apibank
import salience.datasets.jsonl as jsonl
import salience.datasets.locomo as locomo
import salience.datasets.mint as mint
import salience.datasets.sweagent as sweagent
import salience.datasets.taubench as taubench
import salience.datasets.tooltalk as tooltalk
from salience.errors import FormatError, LimitError, SalienceError, TranscriptError
from salience.limits import check_count, check_size, current, loads
from salience.transcript import Transcript

__all__ = ["LAYOUTS", "detect_layout", "iter_files", "known_layouts", "load_transcripts", "save_transcripts"]

#: Layout modules, tried in this order.
LAYOUTS: tuple[str, ...] = ("jsonl", "locomo", "taubench", "mint", "sweagent", "tooltalk", "apibank")

PathLike = Union[str, "os.PathLike[str]"]
_HEAD = 65_536
_SKIP_NAMES = {"license", "license.txt", "license.md", "readme.md", "readme", "readme.txt", "notice"}


_MODULES: dict[str, ModuleType] = {m.NAME: m for m in (jsonl, locomo, taubench, mint, sweagent, tooltalk, apibank)}


def _layout_module(name: str) -> ModuleType | None:
    return _MODULES.get(name)


def _modules() -> list[ModuleType]:
    return [_MODULES[n] for n in LAYOUTS]


def known_layouts() -> list[str]:
    """Names of the layouts, in detection order."""
    return [m.NAME for m in _modules()]


def _head(path: Path) -> str:
    with path.open("rb") as fh:
        raw = fh.read(_HEAD)
    return raw.decode("utf-8", errors="replace")


def detect_layout(path: PathLike) -> str | None:
    """The name of the layout of file ``path``, or None if no loader recognises it."""
    path = Path(path)
    head = _head(path)
    for module in _modules():
        if module.sniff(path, head):
            return str(module.NAME)
    return None


def iter_files(path: Path) -> list[Path]:
    """Files below ``path`` (or ``path`` itself), sorted, hidden files and licenses left out."""
    if path.is_file():
        return [path]
    return sorted(
        p for p in path.rglob("*")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts)
        and p.name.lower() not in _SKIP_NAMES
    )


def load_transcripts(paths: PathLike | Sequence[PathLike], *, layout: str | None = None) -> list[Transcript]:
    """Every transcript in ``paths`` (files or folders), layouts detected from content.

    A file named directly must be in a known layout; inside a folder, files of no
    known layout (licenses, databases, notes) and empty files are passed over. A
    folder with no transcript at all is an error naming the layouts known.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    out: list[Transcript] = []
    known = ", ".join(known_layouts())
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise FormatError(f"{path}: no such file or folder")
        direct = path.is_file()
        found = 0
        for file in iter_files(path):
            if file.stat().st_size == 0:
                continue  # holds no transcript, in whatever layout
            name = layout or detect_layout(file)
            if name is None:
                if direct:
                    _not_json(file)
                    raise FormatError(f"{file}: not in a layout salience knows (known: {known})")
                continue
            module = _layout_module(name)
            if module is None:
                raise FormatError(f"{file}: unknown layout {name!r} (known: {known})")
            try:
                loaded = module.load(file)
            except SalienceError:
                raise
            except Exception as exc:
                raise FormatError(
                    f"{file}: the {name} loader failed: {type(exc).__name__}: {exc}"
                ) from exc
            _check_loaded(file, loaded)
            found += len(loaded)
            out.extend(loaded)
        if not direct and found == 0:
            raise FormatError(f"{path}: no transcripts found in any layout salience knows (known: {known})")
    return out


def _not_json(file: Path) -> None:
    """A :class:`FormatError` ``<file>: not valid JSON: line L, column C: <reason>`` for a file
    that means to be one JSON document (it starts with ``[`` or ``{``) and is not valid JSON
    (nor JSON lines); nothing for a file that parses, or is not JSON at all."""
    head = _head(file).lstrip("\ufeff \t\r\n")
    if head[:1] not in ("[", "{"):
        return
    lines = [line for line in head.splitlines() if line.strip()]
    if len(lines) > 1:
        try:
            json.loads(lines[0])
            return  # JSON lines, in no layout salience knows
        except (json.JSONDecodeError, RecursionError):
            pass
    text = _read_text(file)
    if text is not None:
        loads(text, where=str(file))


def _read_text(file: Path) -> str | None:
    limits = current()
    check_size(file.stat().st_size, where=str(file), limits=limits)
    try:
        return file.read_text(encoding="utf-8-sig")
    except (UnicodeDecodeError, OSError):
        return None


def _check_loaded(file: Path, loaded: Sequence[Transcript]) -> None:
    """What every loader's transcripts must be: within :mod:`salience.limits` (entries)
    and with every tool call answered in time
    (:func:`salience.messages.validate.require_answered`); errors name the file."""
    from salience.messages.validate import require_answered

    for transcript in loaded:
        try:
            check_count(len(transcript.entries), where=f"transcript {transcript.id!r}", what="entries")
            require_answered(transcript)
        except LimitError as exc:
            raise LimitError(f"{file}: {exc}", limit=exc.limit, maximum=exc.maximum, value=exc.value) from None
        except TranscriptError as exc:
            raise TranscriptError(f"{file}: {exc}") from None


def save_transcripts(transcripts: Iterable[Transcript], path: PathLike) -> Path:
    """Write ``transcripts`` as canonical JSONL to ``path``."""
    return jsonl.save(transcripts, path)
