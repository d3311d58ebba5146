"""The scorer's feature columns: their names, in the order of the feature matrix.

:data:`BASE_FEATURES` do not depend on the query, :data:`QUERY_FEATURES` do (see
:mod:`salience.scorer.features` for what each block measures). A scorer file records
the names it was trained on, so adding, removing or reordering a column makes the
bundled default scorer out of date: retrain it (``src/salience/models/README.md``).
"""

from __future__ import annotations

from salience.tooltypes import ToolType

__all__ = ["BASE_FEATURES", "QUERY_FEATURES"]

_ROLES = ("system", "user", "assistant", "tool")
_TYPES = tuple(t.value for t in ToolType)

BASE_FEATURES: tuple[str, ...] = (
    *(f"role_{r}" for r in _ROLES),
    *(f"tooltype_{t}" for t in _TYPES),
    "n_tool_calls",
    "is_task",
    "is_last_user",
    "position",
    "log_entries_after",
    "log_steps_after",
    "log_tokens",
    "decision_words",
    "error_markers",
    "domain_words",
    "n_values",
    "value_density",
    "digit_share",
    "fwd_ref_entries",
    "fwd_ref_steps",
    "fwd_ref_values",
    "bwd_ref_values",
    "superseded",
    "dup_later",
    "sim_task",
    "sim_recent_mean",
    "sim_recent_max",
    "speaker_first",
    "session_position",
    "is_question",
    "time_words",
    # conversational structure and content (0 or neutral where a transcript has none)
    "turn_in_session",
    "session_share",
    "session_first",
    "session_turns_after",
    "length_rank_session",
    "first_person",
    "second_person",
    "phatic_words",
    "past_tense",
    "shares_media",
    "proper_nouns",
    "asks",
    "after_question",
    "before_question",
    "before_reaction",
    "next_log_tokens",
    "novel_words",
    "novel_share",
    "later_word_refs",
    # handles (salience.scorer.handles): distinctive strings, whatever the domain
    "n_handles",
    "handle_density",
    "new_handles",
    "pending_handles",
    "acted_handles",
    "pending_share",
    # what the agent is doing now (salience.scorer.latest): newest request, latest call, own handles
    "user_turns_after",
    "calls_after",
    "latest_call_handles",
    "same_tool_latest",
    "unique_handles",
    # plain words pending and acted on (salience.scorer.latest): what a slot-filling call copies
    "pending_words",
    "acted_words",
)
QUERY_FEATURES: tuple[str, ...] = (
    "bm25",
    "bm25_norm",
    "bm25_rank",
    "cos_query",
    "cos_query_z",
    "cos_query_rank",
    "cos_neighbor_max",
    "bm25_neighbor_max",
    "rrf",
    "value_overlap",
    "word_overlap",
    "speaker_in_query",
    "time_match",
)

_COL = {name: j for j, name in enumerate(BASE_FEATURES)}
_ROLE_CODE = {r: k for k, r in enumerate(_ROLES)}
_ASSISTANT = _ROLE_CODE["assistant"]
