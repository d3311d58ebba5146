"""API-Bank dialogues (AlibabaResearch/DAMO-ConvAI ``api-bank``) -> transcripts.

A dialogue is a JSONL file, one turn per line:

* ``{"role": "User", "text": ...}`` -> a ``user`` entry;
* ``{"role": "AI", "text": ...}`` -> an ``assistant`` entry;
* ``{"role": "API", "api_name", "param_dict", "result": {"output", "exception", ...}}`` ->
  an ``assistant`` entry with no text and one :class:`~salience.transcript.ToolCall`
  (id ``call_<line>``, name ``api_name``, arguments the JSON of ``param_dict``), then a
  ``tool`` entry answering it, named ``api_name``, whose content is the call's ``output``
  (a string as is, anything else as JSON) or ``{"exception": ...}`` when it raised.

Entry ids follow the file's line numbers (from 1): ``l<n>`` for User/AI lines,
``l<n>.call`` and ``l<n>.result`` for an API line. One transcript per file, id
``api-bank-<file stem>``, domain ``"api-bank"``; meta ``level`` (the folder, e.g.
``level-1-given-desc``) and ``apis`` (the API names called, in order).

Not dialogues, so not recognised: ``data/all_apis.csv``, ``data/exceptions.json`` and the
``lv3-samples/*.txt`` scenario sketches (a scene, key facts and the expected API calls,
with no turns).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from salience.datasets._io import json_lines
from salience.errors import FormatError, TranscriptError
from salience.errors import describe as _got
from salience.transcript import Entry, ToolCall, Transcript

__all__ = ["NAME", "load", "sniff"]

NAME = "apibank"
DOMAIN = "api-bank"
_ROLES = {"User": "user", "AI": "assistant", "API": "api"}


def sniff(path: Path, head: str) -> bool:
    """True for an API-Bank dialogue: JSON lines whose first object has role User, AI or API."""
    first = next((line for line in head.splitlines() if line.strip()), "").strip()
    if not first.startswith("{"):
        return False
    try:
        obj = json.loads(first)
    except (json.JSONDecodeError, RecursionError):  # broken, or nested past the parser: not ours
        return False
    role = obj.get("role") if isinstance(obj, dict) else None
    return isinstance(role, str) and role in _ROLES and ("text" in obj or "api_name" in obj)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _api_entries(n: int, obj: Mapping[str, Any], where: str) -> list[Entry]:
    name = obj.get("api_name")
    if not isinstance(name, str) or not name:
        raise FormatError(f"{where}: field 'api_name' must be a non-empty str (got {_got(name)})")
    params = obj.get("param_dict", {})
    if not isinstance(params, Mapping):
        raise FormatError(f"{where}: field 'param_dict' must be an object (got {_got(params)})")
    result = obj.get("result")
    if not isinstance(result, Mapping):
        raise FormatError(f"{where}: field 'result' must be an object with 'output' (got {_got(result)})")
    exception = result.get("exception")
    output = result.get("output")
    meta: dict[str, Any] = {"line": n}
    if exception is not None:
        meta["exception"] = exception
        content = _json({"exception": exception})
    else:
        content = output if isinstance(output, str) else _json(output)
    call = ToolCall(id=f"call_{n}", name=name, arguments=_json(params))
    return [
        Entry(id=f"l{n}.call", role="assistant", content="", tool_calls=(call,), meta={"line": n}),
        Entry(id=f"l{n}.result", role="tool", content=content, name=name, tool_call_id=call.id, meta=meta),
    ]


def load(path: str | os.PathLike[str]) -> list[Transcript]:
    """The dialogue in API-Bank JSONL file ``path``, as a one-transcript list."""
    path = Path(path)
    entries: list[Entry] = []
    apis: list[str] = []
    for n, where, obj in json_lines(path):
        if not isinstance(obj, Mapping):
            raise FormatError(f"{where}: expected a turn object with 'role' (got {_got(obj)})")
        raw_role = obj.get("role")
        role = _ROLES.get(raw_role) if isinstance(raw_role, str) else None
        if role is None:
            allowed = "'User', 'AI', 'API'"
            raise FormatError(f"{where}: field 'role' must be one of {allowed} (got {_got(raw_role)})")
        if role == "api":
            entries.extend(_api_entries(n, obj, where))
            apis.append(obj["api_name"])
            continue
        text = obj.get("text")
        if not isinstance(text, str):
            raise FormatError(f"{where}: field 'text' must be a str (got {_got(text)})")
        entries.append(Entry(id=f"l{n}", role=role, content=text, meta={"line": n}))
    if not entries:
        raise FormatError(f"{path}: no dialogue turns (expected JSON lines with role 'User', 'AI' or 'API')")
    try:
        return [Transcript(id=f"api-bank-{path.stem}", entries=tuple(entries), domain=DOMAIN,
                           meta={"level": path.parent.name, "apis": apis})]
    except TranscriptError as exc:
        raise FormatError(f"{path}: {exc}") from None
