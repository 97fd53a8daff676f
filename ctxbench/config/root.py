"""The whole config: one field per section, hashed into every PlanId."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from ctxbench.config.bench import BenchConfig
from ctxbench.config.capsules import CapsuleConfig
from ctxbench.config.compaction import CompactionConfig
from ctxbench.config.constraints import AUTO
from ctxbench.config.embedding import EmbeddingConfig
from ctxbench.config.index import IndexConfig, TokenizerConfig
from ctxbench.config.llm import LLMConfig
from ctxbench.config.planner import PlannerConfig
from ctxbench.config.proxy import ProxyConfig
from ctxbench.config.retrieval import RetrievalConfig
from ctxbench.config.servers import McpConfig, ServeConfig
from ctxbench.config.ui import UIConfig


@dataclass(frozen=True)
class Config:
    planner: PlannerConfig = field(default_factory=PlannerConfig)
    """``[planner]``"""
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    """``[tokenizer]``"""
    index: IndexConfig = field(default_factory=IndexConfig)
    """``[index]``"""
    embedding: EmbeddingConfig = field(default_factory=EmbeddingConfig)
    """``[embedding]``"""
    retrieval: RetrievalConfig = field(default_factory=RetrievalConfig)
    """``[retrieval]``"""
    llm: LLMConfig = field(default_factory=LLMConfig)
    """``[llm]``"""
    ui: UIConfig = field(default_factory=UIConfig)
    """``[ui]``"""
    proxy: ProxyConfig = field(default_factory=ProxyConfig)
    """``[proxy]``"""
    mcp: McpConfig = field(default_factory=McpConfig)
    """``[mcp]``"""
    serve: ServeConfig = field(default_factory=ServeConfig)
    """``[serve]``"""
    compaction: CompactionConfig = field(default_factory=CompactionConfig)
    """``[compaction]``"""
    capsules: CapsuleConfig = field(default_factory=CapsuleConfig)
    """``[capsules]``"""
    bench: BenchConfig = field(default_factory=BenchConfig)
    """``[bench]``"""

    def canonical(self) -> dict[str, Any]:
        """A JSON-able dict of the whole config, used in PlanIds."""
        return dataclasses.asdict(self)

    def default_budget_tokens(self) -> int:
        """``planner.default_budget`` in tokens; ``"auto"``: the model's context limit (``llm.context_limit``, after
        flags and the environment) minus the reply reserve (``planner.reply_reserve``, or ``llm.max_reply_tokens``)."""
        budget = self.planner.default_budget
        if budget != AUTO:
            return int(budget)
        reserve = self.planner.reply_reserve or self.llm.max_reply_tokens
        return max(1, self.llm.context_limit - reserve)
