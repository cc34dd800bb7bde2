"""The `playwright_mcp` backend: the official @playwright/mcp (pinned 0.0.83) as a private stdio child."""

from backends.playwright_mcp.adapter import PlaywrightMCPBackend
from backends.playwright_mcp.client import ALLOWLIST, ToolRefused

__all__ = ["ALLOWLIST", "PlaywrightMCPBackend", "ToolRefused"]
