"""The model a front end talks to: its settings resolved once, and the one place a turn runner is built.

The ``[llm]`` settings come from the config file, then ``CTXBENCH_LLM_*`` (unless the front end says
not to: the demo), then flags. :func:`make_runner` builds the :class:`~ctxbench.llm.loop.TurnRunner`
for a workbench — ``ctxbench chat`` and the workbench's session both get theirs here.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from typing import TYPE_CHECKING

from ctxbench.config import Config
from ctxbench.tokens import Tokenizer

if TYPE_CHECKING:  # the turn runner's imports load with the first turn, not with the app
    from ctxbench.llm.loop import TurnRunner
    from ctxbench.service.workbench import Workbench


def resolve_model(config: Config, *, from_env: bool = True, **flags: Any) -> Config:
    """``config`` with its ``llm`` section resolved: file, then environment (``from_env``), then ``flags``
    (``base_url``, ``model``, ``api_key_env``, ``context_limit``, ``timeout_s``; None means not given).
    A combination that cannot make a client raises ``ProviderError``."""
    from ctxbench.llm.providers import resolve_llm_config

    llm = resolve_llm_config(config.llm, **flags, environ=None if from_env else {})
    return dataclasses.replace(config, llm=llm)


def make_runner(workbench: Workbench, config: Config, code: Any = None) -> "TurnRunner":
    """The turn runner of ``workbench`` against the configured model (``code``: request_code_context's index)."""
    from ctxbench.llm import loop
    from ctxbench.llm.providers import make_client

    return loop.TurnRunner(workbench, make_client(config.llm), config, code=code)


def offered_tools_tokens(config: Config, tokenizer: Tokenizer) -> int:
    """Tokens of the tool definitions a turn's first call offers: what a plan budgets beside its messages."""
    from ctxbench.llm.tools import offered_tools, tools_tokens

    return tools_tokens(offered_tools(config.llm, 0), tokenizer)
