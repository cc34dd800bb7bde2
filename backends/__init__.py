"""Execution backends behind `computer_use`; `package.json`/`package-lock.json` pin the npm MCP servers."""
