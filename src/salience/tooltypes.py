"""What kind of tool produced an entry: read, search, execute, edit, web, database, other.

The type decides what phase masking lets through and is a feature of the scorer.
It comes from the tool name by keyword rules, which a per-domain map overrides:

>>> tool_type("read_file")
<ToolType.READ: 'read'>
>>> tool_type("get_reservation_details")
<ToolType.DATABASE: 'database'>
>>> tool_type("python")
<ToolType.EXECUTE: 'execute'>
>>> tool_type("frobnicate", overrides={"frobnicate": "edit"})
<ToolType.EDIT: 'edit'>
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from functools import lru_cache

__all__ = ["ToolType", "tool_type"]


class ToolType(enum.StrEnum):
    """Tool categories."""

    READ = "read"
    SEARCH = "search"
    EXECUTE = "execute"
    EDIT = "edit"
    WEB = "web"
    DATABASE = "database"
    OTHER = "other"

    def __str__(self) -> str:
        return self.value


# First match wins; words are matched against the tool name split on _ - . and case.
_RULES: tuple[tuple[ToolType, tuple[str, ...]], ...] = (
    (ToolType.WEB, ("web", "browse", "browser", "http", "url", "fetch", "scrape", "wikipedia", "wiki", "google")),
    (ToolType.SEARCH, ("search", "find", "grep", "query", "lookup", "locate", "list", "ls", "glob", "ripgrep", "rg")),
    (ToolType.EDIT, ("edit", "write", "create", "update", "modify", "replace", "insert", "patch", "apply", "delete",
                     "remove", "book", "cancel", "send", "add", "set", "change", "transfer", "submit", "register",
                     "delete", "str", "append")),
    (ToolType.EXECUTE, ("run", "exec", "execute", "python", "bash", "shell", "cmd", "command", "terminal", "test",
                        "pytest", "compile", "build", "calculate", "calculator", "think", "code", "ipython")),
    (ToolType.READ, ("read", "open", "cat", "view", "show", "file", "goto", "scroll", "head", "tail")),
    (ToolType.DATABASE, ("get", "details", "info", "lookup", "fetch", "retrieve", "account", "user", "reservation",
                         "order", "record", "db", "sql", "database", "table", "check", "status")),
)

_SPLIT = re.compile(r"[_\-.\s/:]+|(?<=[a-z])(?=[A-Z])")


def tool_type(name: str | None, overrides: Mapping[str, str | ToolType] | None = None) -> ToolType:
    """The :class:`ToolType` of a tool called ``name`` (``OTHER`` when unknown or None).

    ``overrides`` maps exact tool names to types and wins over the rules.
    """
    if not name:
        return ToolType.OTHER
    if overrides and name in overrides:
        return ToolType(overrides[name])
    return _by_rules(name)


@lru_cache(maxsize=4096)
def _by_rules(name: str) -> ToolType:
    """The rules' type of ``name`` (a pure function of the name: a history calls a few tools
    many times, and a cold call asks about 700 times, each a split and a scan of the rules)."""
    words = [w.lower() for w in _SPLIT.split(name) if w]
    for kind, keys in _RULES:
        if any(w in keys for w in words):
            return kind
    return ToolType.OTHER
