"""Provider message formats: read, write, detect, merge rules, provider validity.

One module per provider format, each converting that provider's message list to a
:class:`~salience.transcript.Transcript` and back, exactly (``from_x(m).to_x() == m``)::

    openai.py      OpenAI chat messages (one message, one entry)
    anthropic.py   Anthropic Messages (a user message's tool_result blocks are
                   entries of their own; the system prompt is given separately)
    responses.py   OpenAI Responses API input items (messages, function_call and
                   function_call_output, reasoning; unknown items carried through),
                   and check_responses, what that API would refuse
    langchain.py   LangChain messages (``langchain_core.messages``): from_langchain,
                   to_langchain; needs the ``langchain`` extra, so this package does
                   not import it (dispatch does, for LangChain input)
    _common.py     what openai and anthropic share (the Entry.meta keys of their
                   source messages, error helpers), so neither imports the other

and two modules over all the formats::

    dispatch.py    which format a message list is in (detect_format, FORMATS), the way
                   to a Transcript and back (to_transcript, render), Anthropic's
                   same-role merge (merge_same_role), and the MessageCache that lets a
                   compaction read and render only the new messages
    validate.py    what each provider's API would refuse (tool calls and results
                   paired, roles alternating): check_openai, check_anthropic,
                   pending_calls

Imports run one way: these modules import :mod:`salience.transcript`, never the
other way round. ``Transcript.from_openai``, ``.to_openai``, ``.from_anthropic``,
``.to_anthropic`` and ``.anthropic_system`` call the converters that ``openai`` and
``anthropic`` register with :func:`salience.transcript.register_converter` when they
are imported; importing this package (``import salience`` does) imports both.

The read-only data set loaders (canonical JSONL, LoCoMo, tau-bench, ...) are
:mod:`salience.datasets`.
"""

from __future__ import annotations

from salience.messages.anthropic import from_anthropic, system_of, to_anthropic
from salience.messages.openai import from_openai, to_openai

__all__ = ["from_anthropic", "from_openai", "system_of", "to_anthropic", "to_openai"]
