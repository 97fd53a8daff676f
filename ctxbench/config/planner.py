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
    # a mode defined in the config file under a new name starts from these
    auto_retrieve: bool = True
    scaffold_share: Share = 0.05  # share of the budget the orientation scaffold may take
    retrieval_share: Share = 0.2  # share of the budget symbol cards may take
    max_cards: int = 6
    excerpts: bool = False  # Heavy adds an excerpt of <= card_excerpt_lines to each card
    graph_neighbours: bool = False


DEFAULT_MODES: tuple[ModeProfile, ...] = (
    ModeProfile("off", False, 0.0, 0.0, 0, False, False),
    ModeProfile("light", True, 0.06, 0.20, 6, False, False),
    ModeProfile("heavy", True, 0.08, 0.45, 12, True, True),
)


@dataclass(frozen=True)
class PinConfig:
    promote_after_turns: int = 3  # ephemeral referenced in N turns -> leased
    default_lease_ttl: int = 3  # turns
    task_lease_ttl: int = 20


@dataclass(frozen=True)
class ActivationConfig:
    in_plan: float = 0.2
    referenced_by_model: float = 1.0
    referenced_by_user: float = 1.5
    decay: Share = 0.7  # multiplied in each turn
    suggest_threshold: float = 1.5
    max_suggestions: int = 5
    forget_below: float = 0.01  # scores that decay below this are dropped


@dataclass(frozen=True)
class PlannerConfig:
    default_budget: Tokens | Literal["auto"] = 8000  # "auto": see Config.default_budget_tokens
    default_mode: str = "light"
    default_strategy: str = "fused"  # beats every seed strategy on LoCoMo (benchmarks/README.md)
    # the payload's order: "relevance" (the layers, then the history chronologically) or "cache" (what changes least
    # first, so consecutive plans share a long prefix a provider's prompt cache reads: planner/plan.py)
    order: Literal["relevance", "cache"] = "relevance"
    # order "cache": a window of the latest turns starts at a page boundary (pages of this share of the window's part
    # of the plan's budget, counted from the session's first turn), so its start stays put while the session grows
    cache_page_share: Annotated[float, Range(gt=0, le=1)] = 0.25
    # order "cache", fused: the latest turns, from a page boundary, take up to this share of the history budget in
    # place of the continuity step (0: the continuity step as in the relevance order); the rest goes by relevance
    cache_stable_share: Share = 0.0
    window_groups: int = 0  # 0 = all groups (budget still applies)
    provider_family: str = "openai"
    # tokens held back for the reply when the budget is "auto" (0: llm.max_reply_tokens, the cap a call sends)
    reply_reserve: Annotated[int, Range(ge=0, le=MAX_TOKENS)] = 0
    memo_candidates: int = 8  # memos matching the query offered to the planner
    # a summary of earlier turns is sent only when it takes at most this share of what is left for the history: a
    # long summary at a small budget would crowd out the turns the query needs (their originals stay candidates of
    # the retrieval strategies, recalled verbatim)
    summary_share: Share = 0.25
    truncation: TruncationConfig = field(default_factory=TruncationConfig)
    hybrid: HybridConfig = field(default_factory=HybridConfig)
    levels: LevelsConfig = field(default_factory=LevelsConfig)
    semantic: SemanticHistoryConfig = field(default_factory=SemanticHistoryConfig)
    fused: FusedConfig = field(default_factory=FusedConfig)
    instructions: InstructionConfig = field(default_factory=InstructionConfig)
    pins: PinConfig = field(default_factory=PinConfig)
    activation: ActivationConfig = field(default_factory=ActivationConfig)
    modes: tuple[ModeProfile, ...] = DEFAULT_MODES
    system_prompt: str = (
        "You are a careful coding assistant working in the user's repository. "
        "Context below was selected by ctxbench; use request_code_context to expand a symbol "
        "card to its body and query_db to read older messages. "
        "End every reply with a `### STATE` block (Goal:, Context:, Resolved:, Technical Anchors:) that keeps "
        "the technical truth of this session; it replaces the previous one."
    )

    @property
    def mode_names(self) -> tuple[str, ...]:
        """The Context Modes in the order the mode hotkey cycles them (the order of ``modes``)."""
        return tuple(m.name for m in self.modes)

    def mode(self, name: str) -> ModeProfile:
        for profile in self.modes:
            if profile.name == name:
                return profile
        raise ConfigError(f"unknown context mode {name!r}; known: {', '.join(m.name for m in self.modes)}")
