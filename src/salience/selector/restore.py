"""The restore tool: a tool the model itself calls to get an archived entry back.

Every trimmed or stubbed entry holds a marker that names its id: a stub is one line,
``[salience: archived m8: ZFA04Y, HAT136]`` (with its size from 1,000 tokens), a trimmed
entry's cut reads ``[salience: trimmed 640 tokens from m8; restore id m8 via salience_restore]``
(:func:`salience.selector.render.marker_ids` reads the ids back).
Give the model the tool's definition in its provider's format, and answer its calls
with :meth:`RestoreTool.answer`: the archived entries' text, exactly as they were.

>>> from salience import Compactor
>>> tool = Compactor().restore_tool()
>>> tool.name, sorted(tool.definition("anthropic"))
('salience_restore', ['description', 'input_schema', 'name'])
>>> tool.definition("openai")["function"]["parameters"]["required"]
['ids']

The answer goes back as the tool's result, an entry like any other: the next
compaction counts it against the budget (and may archive it again).

Definitions, by :meth:`RestoreTool.definition`'s format:

* ``"openai"``: a Chat Completions tool, ``{"type": "function", "function": {...}}``;
* ``"responses"``: a Responses API function tool, ``{"type": "function", "name": ...}``;
* ``"anthropic"``: ``{"name", "description", "input_schema"}``;
* ``"langchain"``: a ``langchain_core.tools.StructuredTool`` (:meth:`RestoreTool.langchain`
  binds it to the compaction it answers from).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from salience.errors import ParameterError, ParameterTypeError, describe
from salience.selector.render import MARKER, RESTORE_TOOL
from salience.transcript import Entry

if TYPE_CHECKING:
    from salience.selector.result import Compaction
    from salience.selector.session import CompactionSession

__all__ = ["RESTORE_FORMATS", "RESTORE_TOOL", "RestoreError", "RestoreTool", "entry_text"]

#: The formats :meth:`RestoreTool.definition` writes.
RESTORE_FORMATS: tuple[str, ...] = ("openai", "responses", "anthropic", "langchain")

#: Separates the entries of an answer that restores more than one.
_HEADER = MARKER + " restored {id}]"


class RestoreError(ParameterError):
    """A restore tool asked for with bad parameters, or a call with arguments that cannot be
    read (not JSON, no ``ids``)."""


def entry_text(entry: Entry) -> str:
    """What an entry said: its content, then one ``name(arguments)`` line per tool call it makes."""
    return entry.text if entry.tool_calls else entry.content


def _archive_of(source: Any) -> tuple[Mapping[str, Entry], Mapping[str, Entry]]:
    """(archived entries by id, every input entry by id) of a Compaction, a session (its last
    result), a mapping of entries by id, or None (nothing archived yet)."""
    if source is None:
        return {}, {}
    last = getattr(source, "_last", source)  # a CompactionSession answers from its last result
    if last is None:
        return {}, {}
    archive = getattr(last, "archive", None)
    if archive is not None:
        return archive, {e.id: e for e in last.source.entries}
    if isinstance(source, Mapping) and all(isinstance(e, Entry) for e in source.values()):
        return source, {}
    raise ParameterTypeError(f"restore: answers from a Compaction, a CompactionSession or a mapping of entries by id "
                    f"(got {describe(source)})")


def _ids(arguments: Any) -> list[str]:
    """The entry ids a call asks for: ``{"ids": [...]}`` (or ``{"id": "m3"}``), as a mapping or JSON text."""
    args = arguments
    if isinstance(args, (str, bytes)):
        try:
            args = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError as exc:
            raise RestoreError(f"{RESTORE_TOOL}: the arguments are not JSON ({exc.msg} at character {exc.pos})") \
                from None
    if not isinstance(args, Mapping):
        raise RestoreError(f"{RESTORE_TOOL}: the arguments must be an object with 'ids' (got {describe(args)})")
    ids = args.get("ids", args.get("id"))
    if isinstance(ids, str):
        ids = [ids]
    if not isinstance(ids, Sequence) or not ids or not all(isinstance(x, str) and x for x in ids):
        raise RestoreError(f"{RESTORE_TOOL}: 'ids' must be a non-empty list of entry ids such as [\"m8\"] "
                           f"(got {describe(ids)})")
    return list(dict.fromkeys(x.strip() for x in ids))


class RestoreTool:
    """The restore tool's definitions and its handler (see the module doc).

    ``max_ids``: how many entries one call may ask for (the rest are named as left out).
    Made by :meth:`salience.Compactor.restore_tool`.
    """

    name: str = RESTORE_TOOL
    description: str = (
        "Get back, exactly as it was, a context entry that was shortened or archived to save space. "
        "Archived and trimmed entries show a marker naming their id, like '[salience: archived m8: ...]' "
        f"or '[salience: trimmed ... from m8; restore id m8 via {RESTORE_TOOL}]', and a marker's list "
        "'also: m3 (tool): ...' names more archived ones; pass those ids. Ask only for what the next step needs."
    )

    def __init__(self, *, max_ids: int = 8) -> None:
        self.max_ids = max_ids

    def __repr__(self) -> str:
        return f"RestoreTool(name={self.name!r}, max_ids={self.max_ids})"

    # -- definitions --------------------------------------------------------------------------
    @property
    def parameters(self) -> dict[str, Any]:
        """The JSON schema of the arguments."""
        return {
            "type": "object",
            "properties": {
                "ids": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "Entry ids named in '[salience: ...]' markers, e.g. [\"m8\"].",
                }
            },
            "required": ["ids"],
            "additionalProperties": False,
        }

    def definition(self, format: str = "openai", *, source: Any = None) -> Any:
        """The tool definition in ``format`` (one of :data:`RESTORE_FORMATS`); ``source`` is for
        ``"langchain"``, whose tool answers calls itself (see :meth:`langchain`)."""
        if format == "openai":
            return {"type": "function",
                    "function": {"name": self.name, "description": self.description, "parameters": self.parameters}}
        if format == "responses":
            return {"type": "function", "name": self.name, "description": self.description,
                    "parameters": self.parameters, "strict": False}
        if format == "anthropic":
            return {"name": self.name, "description": self.description, "input_schema": self.parameters}
        if format == "langchain":
            return self.langchain(source)
        raise RestoreError(f"restore_tool: format must be one of {', '.join(map(repr, RESTORE_FORMATS))} "
                         f"(got {describe(format)})")

    def langchain(self, source: Any = None) -> Any:
        """A LangChain ``StructuredTool`` that answers from ``source``: a Compaction, a session, or
        a callable returning one (called on each use, so the tool follows an agent loop)."""
        try:
            from langchain_core.tools import StructuredTool
        except ImportError as exc:  # pragma: no cover - exercised without langchain-core
            raise ImportError('the LangChain restore tool needs langchain-core: pip install "salience[langchain]"') \
                from exc

        def restore(ids: list[str]) -> str:
            return self.answer(source() if callable(source) else source, {"ids": ids})

        return StructuredTool.from_function(restore, name=self.name, description=self.description,
                                            args_schema=self.parameters)

    # -- calls --------------------------------------------------------------------------------
    def is_call(self, name: Any) -> bool:
        """Whether a tool call named ``name`` is one for this tool."""
        return name == self.name

    def entries(self, source: Any, arguments: Any) -> tuple[list[Entry], list[str]]:
        """(the entries a call asks for, the ids it asks for that ``source`` has no entry for)."""
        archive, known = _archive_of(source)
        found: list[Entry] = []
        missing: list[str] = []
        for x in _ids(arguments):
            entry = archive.get(x) or known.get(x)
            if entry is None:
                missing.append(x)
            else:
                found.append(entry)
        return found, missing

    def answer(self, source: Any, arguments: Any) -> str:
        """The tool's result for a call with ``arguments`` (a mapping or JSON text), answered
        from ``source`` (a :class:`Compaction`, a :class:`CompactionSession`: its last result, or
        entries by id).

        One id: the entry's text exactly (:func:`entry_text`; the original of a trimmed or stubbed
        entry). Several: each after a ``[salience: restored mX]`` line. Ids it cannot answer are
        named in a closing line rather than raised, so the model reads what went wrong; arguments
        that cannot be read at all are answered the same way.
        """
        try:
            found, missing = self.entries(source, arguments)
        except RestoreError as exc:
            return f"{MARKER} {exc}]"
        extra = found[self.max_ids:]
        found = found[: self.max_ids]
        if len(found) == 1 and not missing and not extra:
            return entry_text(found[0])
        parts = [f"{_HEADER.format(id=e.id)}\n{entry_text(e)}" for e in found]
        if extra:
            parts.append(f"{MARKER} left out (at most {self.max_ids} per call): {', '.join(e.id for e in extra)}]")
        if missing:
            archive, _ = _archive_of(source)
            known = ", ".join(list(archive)[:20]) or "none"
            parts.append(f"{MARKER} no entry with id {', '.join(missing)}; archived ids: {known}]")
        return "\n\n".join(parts)

    def handler(self, source: Compaction | CompactionSession | Callable[[], Any] | None) -> Callable[[Any], str]:
        """``arguments -> answer`` bound to ``source`` (or to a callable returning the current one)."""

        def handle(arguments: Any) -> str:
            return self.answer(source() if callable(source) else source, arguments)

        return handle
