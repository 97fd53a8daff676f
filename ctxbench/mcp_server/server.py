"""The MCP server: a deliberately small tool set over :class:`ctxbench.service.agent_tools.AgentTools`.

Four tools and one resource. Tool schemas are what every agent pays for on every call, so descriptions
are one line and parameters few; ``ctxbench mcp --schemas`` prints their tokens (``mcp.max_schema_tokens``
is the ceiling, checked by the tests). Tools return plain text (no output schema). The engine is
synchronous, so each call runs in a worker thread.
"""
from __future__ import annotations

import asyncio
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from ctxbench.service.agent_tools import AgentTools

CURRENT_PLAN_URI = "ctxbench://plan/current"
INSTRUCTIONS = ("ctxbench plans what context a coding model needs: symbol cards from the repository and "
                "the conversation's history, within a token budget, each with its reason.")


async def _call(fn: Any, *args: Any) -> str:
    """Run a tool in a worker thread; bad input (ValueError, LookupError) is the agent's error to read."""
    try:
        return await asyncio.to_thread(fn, *args)
    except (ValueError, LookupError) as exc:
        raise ToolError(str(exc)) from exc


def build_server(tools: AgentTools) -> MCPServer:
    server: MCPServer = MCPServer("ctxbench", instructions=INSTRUCTIONS)

    @server.tool(name="plan_context", structured_output=False,
                 description="Plan the context for a task: the code cards and history to include, with reasons.")
    async def plan_context(query: Annotated[str, Field(description="the task or question")],
                           mode: Annotated[str | None, Field(description="off, light or heavy")] = None,
                           budget: Annotated[int | None, Field(description="token budget")] = None) -> str:
        return await _call(tools.plan_context, query, mode, budget)

    @server.tool(name="retrieve_code", structured_output=False,
                 description="Search the repository's symbols; returns ranked cards with why each matched.")
    async def retrieve_code(query: str, k: Annotated[int | None, Field(description="number of hits")] = None) -> str:
        return await _call(tools.retrieve_code, query, k)

    @server.tool(name="pin", structured_output=False,
                 description="Keep an item in every plan: target like card:pkg.mod.func, path:file.py, group:3.")
    async def pin(target: str, kind: Annotated[str, Field(description="sticky, leased or ephemeral")] = "sticky"
                  ) -> str:
        return await _call(tools.pin, target, kind)

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
