"""The `chrome_devtools_mcp` backend: the official chrome-devtools-mcp (pinned 1.11.0) as a private stdio child."""

from backends.chrome_devtools_mcp.adapter import ChromeDevToolsMCPBackend
from backends.chrome_devtools_mcp.client import ALLOWLIST, ToolRefused

__all__ = ["ALLOWLIST", "ChromeDevToolsMCPBackend", "ToolRefused"]
