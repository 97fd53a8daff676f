"""From configuration to a chat client.

The LLM settings come from the config file (``[llm]``), then environment variables, then
command-line flags, each overriding the one before. The API key is read from the environment
variable the config *names* (``api_key_env``) at the moment the client is made; only that name
is ever stored or shown, never the key.
"""
from __future__ import annotations

import dataclasses
import math
import os
import urllib.parse
from typing import Mapping

from ctxbench.config import LLMConfig
from ctxbench.llm.client import ChatClient
from ctxbench.records.errors import ProviderError

PROVIDERS = ("offline", "openai", "anthropic")
ANTHROPIC_KEY_ENV = "ANTHROPIC_API_KEY"  # the anthropic provider's key variable where the config names the default

# environment variable -> LLMConfig field
ENV_OVERRIDES: tuple[tuple[str, str], ...] = (
    ("CTXBENCH_LLM_PROVIDER", "provider"),
    ("CTXBENCH_LLM_BASE_URL", "base_url"),
    ("CTXBENCH_LLM_MODEL", "model"),
    ("CTXBENCH_LLM_API_KEY_ENV", "api_key_env"),
    ("CTXBENCH_LLM_CONTEXT_LIMIT", "context_limit"),
    ("CTXBENCH_LLM_TIMEOUT", "timeout_s"),
    ("CTXBENCH_LLM_DEADLINE", "reply_deadline_s"),
    ("CTXBENCH_LLM_MAX_REPLY_TOKENS", "max_reply_tokens"),
)


def resolve_llm_config(
    config: LLMConfig,
    *,
    provider: str | None = None,
    base_url: str | None = None,
    model: str | None = None,
    api_key_env: str | None = None,
    context_limit: int | None = None,
    timeout_s: float | None = None,
    reply_deadline_s: float | None = None,
    max_reply_tokens: int | None = None,
    environ: Mapping[str, str] | None = None,
) -> LLMConfig:
    """``config`` with environment and flag overrides applied.

    A base URL without a provider means an OpenAI-compatible endpoint. Numbers from the
    environment must be positive (``CTXBENCH_LLM_CONTEXT_LIMIT`` a whole number of tokens,
    ``CTXBENCH_LLM_TIMEOUT`` seconds), or the settings are a :class:`ProviderError`.
    """
    env = os.environ if environ is None else environ
    changes: dict[str, object] = {}
    for var, name in ENV_OVERRIDES:
        if env.get(var):
            changes[name] = _env_value(var, name, env[var], config)
    flags = (("provider", provider), ("base_url", base_url), ("model", model), ("api_key_env", api_key_env),
             ("context_limit", context_limit), ("timeout_s", timeout_s), ("reply_deadline_s", reply_deadline_s),
             ("max_reply_tokens", max_reply_tokens))
    for name, value in flags:
        if value:
            changes[name] = value
    for name in ("context_limit", "timeout_s", "reply_deadline_s", "max_reply_tokens"):
        if name in changes and not changes[name] > 0:  # type: ignore[operator]
            raise ProviderError(f"{name} must be positive, got {changes[name]}")
    resolved = dataclasses.replace(config, **changes)
    if resolved.provider == "offline" and resolved.base_url and "provider" not in changes:
        resolved = dataclasses.replace(resolved, provider="openai")
    if resolved.provider not in PROVIDERS:
        raise ProviderError(f"unknown LLM provider {resolved.provider!r}; known: {', '.join(PROVIDERS)}")
    if resolved.provider in ("openai", "anthropic") and resolved.base_url:
        _check_base_url(resolved.base_url)
    if resolved.provider == "openai" and resolved.model in ("", "offline"):
        raise ProviderError("an OpenAI-compatible endpoint needs a model name (--model NAME or [llm] model)")
    if resolved.provider == "anthropic":
        if resolved.model in ("", "offline"):
            raise ProviderError("the anthropic provider needs a model name (--model NAME or [llm] model, "
                                "e.g. claude-sonnet-4-5)")
        if resolved.api_key_env == LLMConfig.api_key_env:  # the default names OpenAI's variable
            resolved = dataclasses.replace(resolved, api_key_env=ANTHROPIC_KEY_ENV)
    return resolved


def _check_base_url(url: str) -> None:
    """A base URL that can never be reached is a settings error, not a network failure to retry."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ProviderError(f"base URL {url!r} is not an http:// or https:// address with a host "
                            "(e.g. http://localhost:11434/v1)")


def _env_value(var: str, name: str, raw: str, config: LLMConfig) -> object:
    """An environment value converted to the type of the LLMConfig field it overrides."""
    kind = type(getattr(config, name))
    if kind is str:
        return raw
    try:
        value = kind(raw.strip())
    except ValueError:
        what = "a whole number" if kind is int else "a number"
        raise ProviderError(f"${var} must be {what}, got {raw!r}") from None
    if not (value > 0 and math.isfinite(value)):
        raise ProviderError(f"${var} must be positive, got {raw!r}")
    return value


def make_client(config: LLMConfig) -> ChatClient:
    """The client for ``config``: the offline model, an OpenAI-compatible endpoint or Anthropic's Messages API."""
    if config.provider == "offline":
        from ctxbench.llm.offline import OfflineClient

        return OfflineClient(config)
    if config.provider == "openai":
        from ctxbench.llm.client import OpenAIChatClient

        return OpenAIChatClient(config, os.environ.get(config.api_key_env) or None)
    if config.provider == "anthropic":
        from ctxbench.llm.anthropic_client import AnthropicChatClient

        return AnthropicChatClient(config, os.environ.get(config.api_key_env) or None)
    raise ProviderError(f"unknown LLM provider {config.provider!r}; known: {', '.join(PROVIDERS)}")


def describe(config: LLMConfig) -> str:
    """One line naming the endpoint, for status bars and errors; never includes the key."""
    if config.provider == "offline":
        return "offline model (no network)"
    where = config.base_url or ("api.anthropic.com" if config.provider == "anthropic" else "api.openai.com")
    return f"{config.model} at {where} (key from ${config.api_key_env})"
