"""The MCP adapter: exactly one tool, `computer_use`, serialized from the service core."""
