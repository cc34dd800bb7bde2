"""How a call reaches the runtime and how its result leaves: the MCP server (stdio and streamable HTTP), the plain
HTTP API, the adapter both share (arguments → the service → the envelope) and the first-party clients.

Apart from the Page-reading domain (`runtime/reading/`): nothing here reads a Page, and nothing there knows how a
call arrived.
"""
