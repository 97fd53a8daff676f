"""Configuration: every weight, limit and share has a name here, never inline.

Config is read from a TOML file (default ``<user config dir>/ctxbench/config.toml``,
overridden by ``CTXBENCH_CONFIG``) and merged over these defaults. All config objects
are frozen dataclasses so that they can be hashed into a PlanId.

One module per group of sections; every public name is re-exported here, so ``from ctxbench.config import X``
is the one way in. ``docs/config-reference.md`` lists every key (``python -m ctxbench.config.reference``).
"""
from __future__ import annotations

from ctxbench.config.bench import BenchConfig, CachePrice
from ctxbench.config.capsules import CapsuleConfig
from ctxbench.config.compaction import CompactionConfig
from ctxbench.config.constants import APP_NAME, BM25_B, BM25_K1, CACHED_SESSIONS
from ctxbench.config.constraints import (
    AUTO, MAX_TOKENS, ConfigError, Penalty, Port, PositiveFloat, PositiveInt, Share, Tokens,
)
from ctxbench.config.embedding import EmbeddingConfig
from ctxbench.config.history import (
    FusedConfig, HybridConfig, LevelsConfig, SemanticHistoryConfig, TruncationConfig,
)
from ctxbench.config.index import IndexConfig, TokenizerConfig
from ctxbench.config.instructions import InstructionConfig
from ctxbench.config.llm import DEFAULT_PRICES, LLMConfig, ModelPrice
from ctxbench.config.loading import config_from, load_config
from ctxbench.config.paths import default_config_path, default_db_path
from ctxbench.config.planner import DEFAULT_MODES, ActivationConfig, ModeProfile, PinConfig, PlannerConfig
from ctxbench.config.proxy import ProxyConfig
from ctxbench.config.retrieval import RetrievalConfig
from ctxbench.config.root import Config
from ctxbench.config.servers import McpConfig, ServeConfig
from ctxbench.config.ui import UIConfig

__all__ = [
    "APP_NAME", "AUTO", "BM25_B", "BM25_K1", "CACHED_SESSIONS", "DEFAULT_MODES", "DEFAULT_PRICES", "MAX_TOKENS",
    "ActivationConfig", "BenchConfig", "CachePrice", "CapsuleConfig", "CompactionConfig", "Config", "ConfigError",
    "EmbeddingConfig", "FusedConfig", "HybridConfig", "IndexConfig", "InstructionConfig", "LLMConfig",
    "LevelsConfig", "McpConfig", "ModeProfile", "ModelPrice", "Penalty", "PinConfig", "PlannerConfig", "Port",
    "PositiveFloat", "PositiveInt", "ProxyConfig", "RetrievalConfig", "SemanticHistoryConfig", "ServeConfig",
    "Share", "TokenizerConfig", "Tokens", "TruncationConfig", "UIConfig", "config_from", "default_config_path",
    "default_db_path", "load_config",
]
