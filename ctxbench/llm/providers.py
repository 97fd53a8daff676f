"""From configuration to a chat client.

The LLM settings come from the config file (``[llm]``), then environment variables, then
command-line flags, each overriding the one before. The API key is read from the environment
variable the config *names* (``api_key_env``) at the moment the client is made; only that name
is ever stored or shown, never the key.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Mapping

from ctxbench.config import LLMConfig
from ctxbench.llm.client import ChatClient

PROVIDERS = ("offline", "openai")

# environment variable -> LLMConfig field
ENV_OVERRIDES: tuple[tuple[str, str], ...] = (
    ("CTXBENCH_LLM_PROVIDER", "provider"),
    ("CTXBENCH_LLM_BASE_URL", "base_url"),
    ("CTXBENCH_LLM_MODEL", "model"),
    ("CTXBENCH_LLM_API_KEY_ENV", "api_key_env"),
)


class ProviderError(ValueError):
    """The LLM settings cannot make a client (unknown provider, missing model)."""


def resolve_llm_config(
    config: LLMConfig,
    *,
    provider: str | None = None,
    base_url: str | None = None,
    model: str | None = None,
    api_key_env: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> LLMConfig:
    """``config`` with environment and flag overrides applied.

    A base URL without a provider means an OpenAI-compatible endpoint.
    """
    env = os.environ if environ is None else environ
    changes: dict[str, str] = {}
    for var, name in ENV_OVERRIDES:
        if env.get(var):
            changes[name] = env[var]
    for name, value in (("provider", provider), ("base_url", base_url), ("model", model), ("api_key_env", api_key_env)):
        if value:
            changes[name] = value
    resolved = dataclasses.replace(config, **changes)
    if resolved.provider == "offline" and resolved.base_url and "provider" not in changes:
        resolved = dataclasses.replace(resolved, provider="openai")
    if resolved.provider not in PROVIDERS:
        raise ProviderError(f"unknown LLM provider {resolved.provider!r}; known: {', '.join(PROVIDERS)}")
    if resolved.provider == "openai" and resolved.model in ("", "offline"):
        raise ProviderError("an OpenAI-compatible endpoint needs a model name (--model NAME or [llm] model)")
    return resolved


def make_client(config: LLMConfig) -> ChatClient:
    """The client for ``config``: the offline model or an OpenAI-compatible endpoint."""
    if config.provider == "offline":
        from ctxbench.llm.offline import OfflineClient

        return OfflineClient(config)
    if config.provider == "openai":
        from ctxbench.llm.client import OpenAIChatClient

        return OpenAIChatClient(config, os.environ.get(config.api_key_env) or None)
    raise ProviderError(f"unknown LLM provider {config.provider!r}; known: {', '.join(PROVIDERS)}")


def describe(config: LLMConfig) -> str:
    """One line naming the endpoint, for status bars and errors; never includes the key."""
    if config.provider == "offline":
        return "offline model (no network)"
    where = config.base_url or "api.openai.com"
    return f"{config.model} at {where} (key from ${config.api_key_env})"
