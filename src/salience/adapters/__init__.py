"""Drop-in adapters: agent loops over provider APIs, and LangChain / LangGraph.

* :mod:`salience.adapters.loops`: :class:`OpenAIContext`, :class:`AnthropicContext`
  (one per conversation: ``prepare(history)`` before each model call, with
  prefix-stable sessions and per-step statistics), :func:`compact_openai`,
  :func:`compact_anthropic`. No extra dependency.
* :mod:`salience.adapters.langchain`: LangChain messages to and from transcripts
  (:meth:`salience.Compactor.compact` takes LangChain messages directly),
  :class:`~salience.adapters.langchain.SalienceMiddleware` for LangChain 1.x
  ``create_agent``, and :func:`~salience.adapters.langchain.pre_model_hook` for LangGraph
  agents. Needs ``pip install "salience[langchain]"``; it is not imported here.
* :mod:`salience.adapters.openai_agents`: :func:`~salience.adapters.openai_agents.input_filter`
  for the OpenAI Agents SDK's ``RunConfig(call_model_input_filter=...)`` (Responses API items).
"""

from __future__ import annotations

from salience.adapters.loops import (
    AnthropicContext,
    ContextStats,
    OpenAIContext,
    StepStats,
    compact_anthropic,
    compact_openai,
)

__all__ = [
    "AnthropicContext",
    "ContextStats",
    "OpenAIContext",
    "StepStats",
    "compact_anthropic",
    "compact_openai",
]
