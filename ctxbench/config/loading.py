"""Reading the config file: TOML merged over the defaults, validated, then the cross-checks types cannot say."""
from __future__ import annotations

import dataclasses
import os
import re
import tomllib
from pathlib import Path
from typing import Any, Mapping

from ctxbench.config.constraints import ConfigError
from ctxbench.config.paths import default_config_path
from ctxbench.config.root import Config


def load_config(path: Path | None = None) -> Config:
    """Load the config file merged over the defaults.

    Only the default location may be absent (then the defaults hold): a path given explicitly, as
    ``path`` (``--config``) or in ``$CTXBENCH_CONFIG``, that does not exist is a ConfigError.
    """
    given = "--config" if path is not None else "$CTXBENCH_CONFIG" if os.environ.get("CTXBENCH_CONFIG") else ""
    path = path or default_config_path()
    config = Config()
    if not path.exists():
        if given:
            raise ConfigError(f"config file {path} does not exist (given by {given})")
        return config
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read config {path}: {exc}") from exc
    return config_from(data, str(path))


def config_from(data: Mapping[str, Any], source: str = "config") -> Config:
    """The defaults with ``data`` (a parsed TOML document) on top, validated as a whole: types and declared
    constraints from the dataclasses (``ctxbench.validation``), then the names one value gives another.
    A ConfigError's first line names the first problem, with ``source`` and the key; one line per problem."""
    from ctxbench.validation import TableError, validate

    try:
        config = validate(Config, data)
    except TableError as exc:
        raise ConfigError("\n".join(f"{source}: {p}" for p in exc.problems)) from None
    problems = _cross_checks(config)
    if problems:
        raise ConfigError("\n".join(f"{source}: {p}" for p in problems))
    return config


def _tier_problems(config: Config) -> list[str]:
    """``[proxy.truncate_tiers]``: each key a known Context Mode, each value known truncation tiers."""
    from ctxbench.records.vocab import TRUNCATION_TIERS

    problems = []
    modes = config.planner.mode_names
    for mode, value in config.proxy.truncate_tiers:
        if mode not in modes:
            problems.append(f"proxy.truncate_tiers.{mode}: unknown context mode {mode!r}; known: {', '.join(modes)}")
        for tier in (t.strip() for t in value.split(",")):
            if tier and tier not in TRUNCATION_TIERS:
                problems.append(f"proxy.truncate_tiers.{mode}: unknown truncation tier {tier!r}; known: "
                                f"{', '.join(TRUNCATION_TIERS)}")
    return problems


def _cross_checks(config: Config) -> list[str]:
    """What types cannot say: a name that must name something defined elsewhere."""
    from ctxbench.records.vocab import STRATEGIES
    from ctxbench.tokens import TokenizerUnavailable, check_tokenizer_name

    problems = []
    planner = config.planner
    if planner.default_mode not in planner.mode_names:
        problems.append(f"planner.default_mode: unknown context mode {planner.default_mode!r}; known: "
                        f"{', '.join(planner.mode_names)}")
    if planner.default_strategy not in STRATEGIES:
        problems.append(f"planner.default_strategy: unknown strategy {planner.default_strategy!r}; known: "
                        f"{', '.join(STRATEGIES)}")
    fused = planner.fused
    for name in ("instruction_patterns", "temporal_query_patterns", "temporal_text_patterns"):
        patterns = getattr(fused, name)
        bad = False
        for n, pattern in enumerate(patterns):
            try:
                re.compile(pattern)
            except re.error as exc:
                bad = True
                problems.append(f"planner.fused.{name}[{n}]: not a regular expression ({exc}): {pattern!r}")
        if not bad:  # the strategy joins them into one expression: a global flag such as "(?i)" breaks the join
            try:
                re.compile("|".join(f"(?:{p})" for p in patterns if p), re.IGNORECASE | re.MULTILINE)
            except re.error as exc:
                problems.append(f"planner.fused.{name}: the patterns do not join into one expression ({exc}); "
                                f"leave out global flags such as (?i): matching ignores case already")
    problems.extend(_tier_problems(config))
    mcp = config.mcp
    if mcp.default_k > mcp.max_k:
        problems.append(f"mcp.default_k: {mcp.default_k} is more than mcp.max_k ({mcp.max_k}); the default must be "
                        "a number a call may ask for")
    instructions = planner.instructions
    for name in (f.name for f in dataclasses.fields(instructions) if f.name.endswith("_patterns")):
        for n, pattern in enumerate(getattr(instructions, name)):
            try:
                re.compile(pattern)
            except re.error as exc:
                problems.append(f"planner.instructions.{name}[{n}]: not a regular expression ({exc}): {pattern!r}")
    try:  # only a tokenizer that loads offline is accepted (tiktoken downloads any other encoding)
        check_tokenizer_name(config.tokenizer.name)
    except TokenizerUnavailable as exc:
        problems.append(f"tokenizer.name: {exc}")
    return problems
