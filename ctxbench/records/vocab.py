"""Every vocabulary of the domain, defined once.

The names a plan, a pin, a message or a setting may take. Modules that check or list one of these
import it from here; nothing else spells the lists out. Context Modes are not here: they are named
profiles in the config (``config.PlannerConfig.modes``), so the set of modes and their cycle order
come from there.
"""
from __future__ import annotations

# -- messages ---------------------------------------------------------------------------------------
ROLES = ("system", "user", "assistant", "tool")
MESSAGE_STATUSES = ("active", "dropped")

# Provider families whose tool-call formats are compatible (seed 001: gemini ~ gemini_gca).
STRATEGY_FAMILIES: dict[str, str] = {
    "openai": "openai",
    "anthropic": "anthropic",
    "responses": "openai",  # OpenAI's Responses API, as the proxy records it: tool calls as OpenAI's
    "claude-code": "anthropic",
    "gemini": "gemini",
    "gemini_gca": "gemini",
    "aider": "aider",
}

# -- plans ------------------------------------------------------------------------------------------
STRATEGIES = ("window", "hybrid", "levels", "semantic", "fused")  # history strategies, in the order a picker cycles
EMBEDDING_STRATEGIES = ("semantic", "fused")  # the strategies that compare the history with the query by meaning

INCLUDED_REASONS = (
    "mandatory",
    "pinned_sticky",
    "pinned_leased",
    "pinned_ephemeral",
    "recent_window",
    "keyword_match",
    "semantic_match",
    "graph_neighbour",
    "scaffold",
    "state",
    "memory_level",
    "client_sent",  # a proxied request: the assistant's client put it there
    "standing_instruction",
    "summary",  # a summary of earlier turns (or a protected turn sent verbatim beside it)
    "capsule",  # a capsule of code (a module's or a process's summary) the retrieval offered; never ground truth
)
EXCLUDED_REASONS = (
    "over_budget",
    "mode_off",
    "outside_window",
    "below_threshold",  # a card whose retrieval hit is under the relevance floor (nothing ties it to the turn)
    "card_limit",  # a card above the floor, past the mode's number of cards (``ModeProfile.max_cards``)
    "isolated_strategy",
    "lease_expired",
    "dropped_by_user",
    "duplicate",
    "summarised",  # a turn a summary stands in for (the detail names the summary)
    "stale",  # a capsule whose covered files changed since it was written, withheld ([capsules] include_stale)
)
REASONS = INCLUDED_REASONS + EXCLUDED_REASONS

SECTIONS = ("system", "pins", "history", "retrieval", "scaffold")
ITEM_KINDS = (
    "system_prompt",
    "system_message",
    "state",
    "scratchpad",
    "memo",
    "pin",
    "history_atom",
    "current_turn",
    "symbol_card",
    "scaffold",
    "tool_definitions",
    "tool_atom",  # proxied requests: a tool call with its result
    "attached_file",  # proxied requests: a file (or document, audio) the client attached
    "image",  # proxied requests: an image, counted as its provider bills it (service.proxy.images)
    "summary",  # a summary of earlier turns (compaction)
    "capsule",  # a capsule of code: a module's or a process's summary (seed 002), a retrieval aid
    # proxied requests: what the assistant adds around the user's words (service.proxy.anatomy)
    "memory_file", "skill_list", "todo_list", "environment", "reminder", "few_shot", "repo_map", "chat_files",
    "request_options",  # proxied requests: the body's model, options and JSON syntax (bytes, no tokens)
)
# the sections of a proxied request's plan (``ctxbench proxy``), in payload order
PROXY_SECTIONS = ("system", "tools", "scaffold", "pins", "history", "tool_results", "files")

# -- pins -------------------------------------------------------------------------------------------
PIN_KINDS = ("sticky", "leased", "ephemeral")
LEASE_SCOPES = ("turn", "task")
PIN_SOURCES = ("user", "activation", "model", "promotion")

# What a user can pin: a turn, one atom of it, a symbol card, a memo, a note of their own, a file.
PIN_TARGET_PREFIXES = ("group:", "atom:", "card:", "memo:", "text:", "path:")
# What activation may raise as a suggested pin on its own (the model's own suggestions can name any target).
ACTIVATION_SUGGESTION_PREFIXES = ("card:", "group:")

# -- messages ---------------------------------------------------------------------------------------
# The flag on a user message whose turn ended with no reply at all (failed, cancelled or interrupted before
# the model's first token): its turn is dropped from plans (kept in the store, ``/context restore`` brings
# it back), so the next turn never sends two user messages in a row.
UNANSWERED_FLAG = "unanswered"

# -- truncation tiers ------------------------------------------------------------------------------------
# Tool results are cut by tier (seed 001): the newest of the active turn, older ones of the active turn, those
# of past turns (``planner.truncation`` holds each tier's size; ``[proxy.truncate_tiers]`` names them per mode).
TIER_ACTIVE_RECENT = "active_recent"
TIER_ACTIVE_OLDER = "active_older"
TIER_INACTIVE = "inactive"
TRUNCATION_TIERS = (TIER_ACTIVE_RECENT, TIER_ACTIVE_OLDER, TIER_INACTIVE)

# how a plan that no Context Mode shaped (a proxied plan whose conversation the user set no mode for) names its mode
# where a line prints it (`show`, the offline model)
NO_MODE = "none"
