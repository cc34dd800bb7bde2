"""open_claude_chrome: a first-party CDP backend with a Claude-in-Chrome-compatible tool contract."""

from backends.open_claude_chrome.adapter import OpenClaudeChromeBackend
from backends.open_claude_chrome.contract import ToolContract

__all__ = ["OpenClaudeChromeBackend", "ToolContract"]
