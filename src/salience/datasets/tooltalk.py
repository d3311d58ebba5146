"""ToolTalk conversations (microsoft/ToolTalk, ``data/easy``, ``data/tooltalk``) -> transcripts.

A conversation file is one JSON object: ``name``, ``conversation_id``, ``suites_used``,
``apis_used``, ``scenario``, ``user`` (the simulated user's account), ``metadata``
(location, timestamp, session token) and ``conversation``, a list of turns
``{"index", "role": "user"|"assistant", "text", "apis": [...]}``. Each API call of an
assistant turn is ``{"request": {"api_name", "parameters"}, "response", "exception"}``.

Entries, per turn at position ``k`` in ``conversation`` (the files' own ``index`` is kept in
meta but not trusted for ids: some files repeat or omit it):

* a user turn: one ``user`` entry, id ``t<k>``;
* an assistant turn: for its j-th API call, an ``assistant`` entry with no text and one
  :class:`~salience.transcript.ToolCall` (id ``call_<k>_<j>``, name the API, arguments the
  JSON of ``parameters``), id ``t<k>.call<j>``, then a ``tool`` entry answering it, id
  ``t<k>.result<j>``, name the API, content the JSON of ``response`` (or
  ``{"exception": ...}`` when the call raised; meta ``exception`` has the text too); then
  the assistant's reply as an ``assistant`` entry, id ``t<k>``.

One transcript per file, id ``tooltalk-<name>``, domain ``"tooltalk"``. Meta:
``conversation_id``, ``name``, ``suites`` (``suites_used``), ``apis_used``, ``scenario``,
``user`` and ``metadata``. ToolTalk gives the model the user and metadata in a system
prompt of its own making; the loader does not invent one, they stay in meta.

``data/databases/*.json`` (the API back ends' state) are not conversations and are not
recognised.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from salience.datasets._io import read_json as _read_json
from salience.errors import FormatError, TranscriptError
from salience.errors import describe as _got
from salience.transcript import Entry, ToolCall, Transcript

__all__ = ["NAME", "conversation_to_transcript", "load", "sniff"]

NAME = "tooltalk"
DOMAIN = "tooltalk"


def sniff(path: Path, head: str) -> bool:
    """True for a ToolTalk conversation: JSON with ``conversation_id`` and ``suites_used``/``apis_used``."""
    if not head.lstrip().startswith("{"):
        return False
    return bool(
        re.search(r'"conversation_id"\s*:', head)
        and re.search(r'"(suites_used|apis_used)"\s*:\s*\[', head)
    )


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _api_entries(k: Any, j: int, api: Any, where: str) -> list[Entry]:
    if not isinstance(api, Mapping):
        raise FormatError(f"{where}: expected an API call object with 'request' (got {_got(api)})")
    request = api.get("request")
    if not isinstance(request, Mapping):
        raise FormatError(f"{where}: field 'request' must be an object with 'api_name' (got {_got(request)})")
    name = request.get("api_name")
    if not isinstance(name, str) or not name:
        raise FormatError(f"{where}: field 'request.api_name' must be a non-empty str (got {_got(name)})")
    params = request.get("parameters", {})
    if not isinstance(params, Mapping):
        raise FormatError(f"{where}: field 'request.parameters' must be an object (got {_got(params)})")
    exception = api.get("exception")
    call = ToolCall(id=f"call_{k}_{j}", name=name, arguments=_json(params))
    meta: dict[str, Any] = {"turn": k, "api": j}
    result_meta = dict(meta)
    if exception is not None:
        result_meta["exception"] = exception
        content = _json({"exception": exception})
    else:
        content = _json(api.get("response"))
    return [
        Entry(id=f"t{k}.call{j}", role="assistant", content="", tool_calls=(call,), meta=meta),
        Entry(id=f"t{k}.result{j}", role="tool", content=content, name=name, tool_call_id=call.id, meta=result_meta),
    ]


def conversation_to_transcript(conv: Mapping[str, Any], *, id: str | None = None, where: str = "") -> Transcript:
    """One ToolTalk conversation object as a transcript (see the module docstring)."""
    prefix = f"{where}: " if where else ""
    if not isinstance(conv, Mapping):
        raise FormatError(f"{prefix}expected a conversation object (got {_got(conv)})")
    turns = conv.get("conversation")
    if not isinstance(turns, list):
        raise FormatError(f"{prefix}field 'conversation' must be a list of turns (got {_got(turns)})")
    name = conv.get("name", conv.get("conversation_id"))
    if id is None:
        if not isinstance(name, (str, int)) or isinstance(name, bool) or not str(name):
            raise FormatError(f"{prefix}field 'name' must be a non-empty str (got {_got(name)})")
        id = f"tooltalk-{name}"
    entries: list[Entry] = []
    try:
        for pos, turn in enumerate(turns):
            at = f"{prefix}conversation[{pos}]"
            if not isinstance(turn, Mapping):
                raise FormatError(f"{at}: expected a turn object with 'role' and 'text' (got {_got(turn)})")
            role, text = turn.get("role"), turn.get("text", "")
            k = pos
            if role not in ("user", "assistant"):
                raise FormatError(f"{at}: field 'role' must be 'user' or 'assistant' (got {_got(role)})")
            if text is None:
                text = ""
            if not isinstance(text, str):
                raise FormatError(f"{at}: field 'text' must be a str (got {_got(text)})")
            apis = turn.get("apis") or []
            if not isinstance(apis, list):
                raise FormatError(f"{at}: field 'apis' must be a list of API calls (got {_got(apis)})")
            if apis and role != "assistant":
                raise FormatError(f"{at}: field 'apis' is only allowed on assistant turns (got role {role!r})")
            for j, api in enumerate(apis):
                entries.extend(_api_entries(k, j, api, f"{at}.apis[{j}]"))
            entries.append(Entry(id=f"t{k}", role=role, content=text,
                                 meta={"index": turn["index"]} if "index" in turn else {}))
        meta = {
            "conversation_id": conv.get("conversation_id"),
            "name": conv.get("name"),
            "suites": conv.get("suites_used"),
            "apis_used": conv.get("apis_used"),
            "scenario": conv.get("scenario"),
            "user": conv.get("user"),
            "metadata": conv.get("metadata"),
        }
        return Transcript(id=id, entries=tuple(entries), domain=DOMAIN, meta=meta)
    except TranscriptError as exc:
        if isinstance(exc, FormatError):
            raise
        raise FormatError(f"{prefix}{exc}") from None


def load(path: str | os.PathLike[str]) -> list[Transcript]:
    """The conversation in ToolTalk file ``path``, as a one-transcript list."""
    path = Path(path)
    data = _read_json(path)
    if not isinstance(data, Mapping):
        raise FormatError(f"{path}: expected a JSON object with 'conversation' (got {_got(data)})")
    name = data.get("name")
    tid = f"tooltalk-{name}" if isinstance(name, str) and name else f"tooltalk-{path.stem}"
    return [conversation_to_transcript(data, id=tid, where=str(path))]
