"""The MCP server: a deliberately small tool set over :class:`ctxbench.service.agent_tools.AgentTools`.

Four tools and one resource. Tool schemas are what every agent pays for on every call, so descriptions
are one line and parameters few; ``ctxbench mcp --schemas`` prints their tokens (``mcp.max_schema_tokens``
is the ceiling, checked by the tests). Tools return plain text (no output schema). The engine is
synchronous, so each call runs in a worker thread.
"""
from __future__ import annotations

import asyncio
import importlib.metadata
from typing import Annotated, Any, Literal, Optional

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from ctxbench.config import MAX_TOKENS
from ctxbench.records.vocab import PIN_KINDS
from ctxbench.service.agent_tools import AgentTools, over_budget_line

CURRENT_PLAN_URI = "ctxbench://plan/current"
INSTRUCTIONS = ("ctxbench plans what context a coding model needs: symbol cards from the repository and "
                "the conversation's history, within a token budget, each with its reason.")


def server_version() -> str:
    """ctxbench's version, which the server reports in its handshake."""
    try:
        return importlib.metadata.version("ctxbench")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"


async def _call(fn: Any, *args: Any) -> str:
    """Run a tool in a worker thread; bad input (ValueError, LookupError, a number SQLite cannot hold) is the
    agent's error to read."""
    try:
        return await asyncio.to_thread(fn, *args)
    except (ValueError, LookupError, OverflowError) as exc:
        raise ToolError(str(exc)) from exc


def build_server(tools: AgentTools) -> MCPServer:
    server: MCPServer = MCPServer("ctxbench", instructions=INSTRUCTIONS, version=server_version())
    modes = tuple(tools.config.planner.mode_names)
    max_k = tools.config.mcp.max_k

    # the bounds and enums depend on the config (its modes, mcp.max_k): the annotations are given as objects,
    # not the strings this module's ``from __future__ import annotations`` makes of them
    async def plan_context(query, mode=None, budget=None) -> str:
        answer = await _call(tools.plan_context, query, mode, budget)
        plan = tools.last_plan
        if plan is not None and plan.over_budget:  # an error the agent sees as one, with the plan to act on
            raise ToolError(over_budget_line(plan) + "\n" + answer)
        return answer

    plan_context.__annotations__ = {
        "query": Annotated[str, Field(description="the task or question")],
        "mode": Optional[Literal[modes]],  # type: ignore[valid-type]
        "budget": Annotated[Optional[int], Field(description="token budget", ge=1, le=MAX_TOKENS)],
        "return": str}
    server.tool(name="plan_context", structured_output=False,
                description="Plan the context for a task: the code cards and history to include, with reasons.")(
        plan_context)

    async def retrieve_code(query, k=None) -> str:
        return await _call(tools.retrieve_code, query, k)

    retrieve_code.__annotations__ = {
        "query": str, "k": Annotated[Optional[int], Field(description="number of hits", ge=1, le=max_k)],
        "return": str}
    server.tool(name="retrieve_code", structured_output=False,
                description="Search the repository's symbols; returns ranked cards with why each matched.")(
        retrieve_code)

    async def pin(target, kind="sticky") -> str:
        return await _call(tools.pin, target, kind)

    pin.__annotations__ = {"target": str, "kind": Literal[PIN_KINDS], "return": str}  # type: ignore[valid-type]
    server.tool(name="pin", structured_output=False,
                description="Keep an item in every plan: target like card:pkg.mod.func, path:file.py, group:3.")(pin)

    @server.tool(name="unpin", structured_output=False, description="Remove a pin.")
    async def unpin(target: str) -> str:
        return await _call(tools.unpin, target)

    @server.resource(CURRENT_PLAN_URI, name="current_plan", mime_type="application/json",
                     description="The last plan: every item, included or not, with tokens and reason.")
    async def current_plan() -> str:
        return await _call(tools.current_plan)

    return server


async def tool_listing(server: MCPServer) -> list[dict[str, Any]]:
    """The tools as a client lists them (name, description, input schema), for measuring their size."""
    return [{"name": t.name, "description": t.description or "", "inputSchema": t.input_schema}
            for t in await server.list_tools()]
