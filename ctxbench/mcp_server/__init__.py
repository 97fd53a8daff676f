"""``ctxbench mcp``: the planner as MCP tools (the official ``mcp`` SDK's MCPServer over stdio).

Named ``mcp_server`` so that it never shadows the SDK's own ``mcp`` package.
"""
