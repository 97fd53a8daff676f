"""The MCP server's and the browser workbench's sections (``[mcp]``, ``[serve]``)."""
from __future__ import annotations

from dataclasses import dataclass

from ctxbench.config.constraints import Port, PositiveInt


@dataclass(frozen=True)
class McpConfig:
    """``ctxbench mcp``: the planner as tools for other agents."""

    max_schema_tokens: PositiveInt = 1000
    """every tool's name, description and input schema together"""
    default_k: PositiveInt = 8
    """hits ``retrieve_code`` returns unless asked for another number"""
    max_k: PositiveInt = 50
    """the most hits a ``retrieve_code`` call may ask for"""
    card_chars: PositiveInt = 1200
    """characters of a symbol card's text in a tool result"""
    max_text_pin_chars: PositiveInt = 20_000
    """the largest ``text:`` pin an agent may add: a pin is sent in every later plan, so a pasted file would put every
    plan over budget"""


@dataclass(frozen=True)
class ServeConfig:
    """``ctxbench serve``: the workbench in a browser (textual-serve)."""

    host: str = "127.0.0.1"
    """never another: the served workbench answers to its loopback Host and token only"""
    port: Port = 8790
    """the port the served workbench listens on"""
    max_sessions: PositiveInt = 1
    """browser sessions at once (each runs its own `ctxbench open`); one more is refused"""
