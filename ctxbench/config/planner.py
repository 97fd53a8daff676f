"""The planner's section (``[planner]``): budgets, Context Modes, order, pins, activation and its subsections."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

from ctxbench.config.constraints import MAX_TOKENS, ConfigError, Share, Tokens
from ctxbench.config.history import FusedConfig, HybridConfig, LevelsConfig, SemanticHistoryConfig, TruncationConfig
from ctxbench.config.instructions import InstructionConfig
from ctxbench.validation import Range


@dataclass(frozen=True)
class ModeProfile:
    """A Context Mode: how much retrieval and which budget shares."""

    name: str
    """the mode's name (``off``, ``light``, ``heavy``, or one the config file defines)"""
    auto_retrieve: bool = True
    """retrieve code for every turn (a mode the config file defines under a new name starts from these defaults)"""
    scaffold_share: Share = 0.05
    """share of the budget the orientation scaffold may take"""
    retrieval_share: Share = 0.2
    """share of the budget symbol cards may take"""
    max_cards: int = 6
    """symbol cards a plan may carry"""
    excerpts: bool = False
    """Heavy adds an excerpt of <= card_excerpt_lines to each card"""
    graph_neighbours: bool = False
    """retrieval adds the code graph's neighbours of the best hits"""


DEFAULT_MODES: tuple[ModeProfile, ...] = (
    ModeProfile("off", False, 0.0, 0.0, 0, False, False),
    ModeProfile("light", True, 0.06, 0.20, 6, False, False),
    ModeProfile("heavy", True, 0.08, 0.45, 12, True, True),
)


@dataclass(frozen=True)
class PinConfig:
    promote_after_turns: int = 3
    """ephemeral referenced in N turns -> leased"""
    default_lease_ttl: int = 3
    """turns a lease lasts (a task-scoped one: ``task_lease_ttl``)"""
    task_lease_ttl: int = 20
    """turns a task-scoped lease lasts"""


@dataclass(frozen=True)
class ActivationConfig:
    in_plan: float = 0.2
    """activation an item gains when it is sent in a plan"""
    referenced_by_model: float = 1.0
    """activation an item gains when the model names it"""
    referenced_by_user: float = 1.5
    """activation an item gains when the user names it"""
    decay: Share = 0.7
    """an item's activation is multiplied by this in each turn"""
    suggest_threshold: float = 1.5
    """items at least this active (and not pinned) are suggested as pins"""
    max_suggestions: int = 5
    """pin suggestions offered at once"""
    forget_below: float = 0.01
    """scores that decay below this are dropped"""


@dataclass(frozen=True)
class PlannerConfig:
    default_budget: Tokens | Literal["auto"] = 8000
    """"auto": see Config.default_budget_tokens"""
    default_mode: str = "light"
    """the Context Mode a new session starts in"""
    default_strategy: str = "fused"
    """the history strategy a plan uses unless asked for another (``fused``, ``semantic``, ``levels``, ``hybrid``, ...)
    """
    order: Literal["relevance", "cache"] = "relevance"
    """the payload's order: "relevance" (the layers, then the history chronologically) or "cache" (what changes least
    first, so consecutive plans share a long prefix a provider's prompt cache reads: planner/plan.py)"""
    cache_page_share: Annotated[float, Range(gt=0, le=1)] = 0.25
    """order "cache": a window of the latest turns starts at a page boundary (pages of this share of the window's part
    of the plan's budget, counted from the session's first turn), so its start stays put while the session grows"""
    cache_stable_share: Share = 0.0
    """order "cache", fused: the latest turns, from a page boundary, take up to this share of the history budget in
    place of the continuity step (0: the continuity step as in the relevance order); the rest goes by relevance"""
    cache_keep_share: Share = 0.0
    """order "cache", fused: the history atoms of the session's previous plan, a prefix of them in that plan's order,
    stay in up to this share of the history budget while the user changed nothing (same budget, mode, strategy,
    window, pins and drops); new picks follow them (0: every plan picks afresh). planner/cache.py"""
    cache_keep_margin: Annotated[float, Range(ge=0)] = 1.0
    """order "cache", cache_keep_share > 0: a kept atom stays while its score for the new query is at least the
    score of the best atom a fresh plan would leave out, less this margin (fused scores are z-scores); the first one
    below it goes, with every atom after it (but see cache_keep_slack)"""
    cache_keep_slack: Share = 0.0
    """order "cache", cache_keep_share > 0: atoms below the floor (cache_keep_margin) may stay, up to this share of
    the history budget, where atoms at or above it come after them (the prefix reaches those); what follows the last
    such atom goes"""
    window_groups: int = 0
    """0 = all groups (budget still applies)"""
    provider_family: str = "openai"
    """the provider family a plan's payload is shaped for (its tool-result and system message form)"""
    reply_reserve: Annotated[int, Range(ge=0, le=MAX_TOKENS)] = 0
    """tokens held back for the reply when the budget is "auto" (0: llm.max_reply_tokens, the cap a call sends)"""
    memo_candidates: int = 8
    """memos matching the query offered to the planner"""
    summary_share: Share = 0.25
    """a summary of earlier turns is sent only when it takes at most this share of what is left for the history: a long
    summary at a small budget would crowd out the turns the query needs (their originals stay candidates of the
    retrieval strategies, recalled verbatim)"""
    truncation: TruncationConfig = field(default_factory=TruncationConfig)
    """tool-result truncation tiers (``[planner.truncation]``)"""
    hybrid: HybridConfig = field(default_factory=HybridConfig)
    """the ``hybrid`` history strategy (``[planner.hybrid]``)"""
    levels: LevelsConfig = field(default_factory=LevelsConfig)
    """the ``levels`` history strategy (``[planner.levels]``)"""
    semantic: SemanticHistoryConfig = field(default_factory=SemanticHistoryConfig)
    """the ``semantic`` history strategy (``[planner.semantic]``)"""
    fused: FusedConfig = field(default_factory=FusedConfig)
    """the ``fused`` history strategy, the default (``[planner.fused]``)"""
    instructions: InstructionConfig = field(default_factory=InstructionConfig)
    """the standing-instruction detector (``[planner.instructions]``)"""
    pins: PinConfig = field(default_factory=PinConfig)
    """pin leases (``[planner.pins]``)"""
    activation: ActivationConfig = field(default_factory=ActivationConfig)
    """activation scores (``[planner.activation]``)"""
    modes: tuple[ModeProfile, ...] = DEFAULT_MODES
    """the Context Modes, in the order the mode hotkey cycles them (``[[planner.modes]]``)"""
    system_prompt: str = (
        "You are a careful coding assistant working in the user's repository. "
        "Context below was selected by ctxbench; use request_code_context to expand a symbol "
        "card to its body and query_db to read older messages. "
        "End every reply with a `### STATE` block (Goal:, Context:, Resolved:, Technical Anchors:) that keeps "
        "the technical truth of this session; it replaces the previous one."
    )
    """the system message every plan starts with"""

    @property
    def mode_names(self) -> tuple[str, ...]:
        """The Context Modes in the order the mode hotkey cycles them (the order of ``modes``)."""
        return tuple(m.name for m in self.modes)

    def mode(self, name: str) -> ModeProfile:
        for profile in self.modes:
            if profile.name == name:
                return profile
        raise ConfigError(f"unknown context mode {name!r}; known: {', '.join(m.name for m in self.modes)}")
