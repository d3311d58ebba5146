"""What the OpenAI and Anthropic converters share, so that neither imports the other.

* the :attr:`Entry.meta <salience.transcript.Entry.meta>` keys under which each
  reader keeps its copy of the source message (each writer looks at the other's
  copy for parts it can carry over, images say);
* the error helpers their messages are built with.
"""

from __future__ import annotations

from functools import partial

from salience.errors import TranscriptError, describe

__all__ = ["ANTHROPIC_KEY", "LANGCHAIN_KEY", "OPENAI_KEY", "fail", "short"]

#: ``Entry.meta`` key of an entry's source OpenAI message (``salience.messages.openai.KEY``).
OPENAI_KEY = "_openai"
#: ``Entry.meta`` key of an entry's source Anthropic message (``salience.messages.anthropic.KEY``).
ANTHROPIC_KEY = "_anthropic"
#: ``Entry.meta`` key of an entry's source LangChain message (``salience.messages.langchain.KEY``).
LANGCHAIN_KEY = "_langchain"

#: A value as error messages show it (``3 that is a int``), ``None`` without its type.
short = partial(describe, none_typed=False)


def fail(where: str, field: str, expected: str, got: object) -> TranscriptError:
    """``<where>: field '<field>' must be <expected> (got <got>)``."""
    return TranscriptError(f"{where}: field {field!r} must be {expected} (got {short(got)})")
