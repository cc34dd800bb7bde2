"""The production runtime: one MCP tool, `computer_use`, acting only on the exact Pages a user authorized.

Depends on mcp, pydantic and aiohttp only; never imports `lab/`.
"""
