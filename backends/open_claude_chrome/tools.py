"""The state every tool of the contract shares (the bound page, the ref table, the screenshot the next call may
point into) and the `tool` wrapper that every tool goes through."""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Awaitable, Callable
from typing import Concatenate, ParamSpec, TypeVar

from backends.open_claude_chrome.accessibility import PageRead
from backends.open_claude_chrome.cursor import ActionCursor
from backends.open_claude_chrome.refs import IsolatedWorlds, RefTable
from backends.open_claude_chrome.session import PageSession, ProtocolError
from runtime.backend import BackendError, Failure

P = ParamSpec("P")
R = TypeVar("R")


def tool(
    method: Callable[Concatenate[ToolBase, P], Awaitable[R]],
) -> Callable[Concatenate[ToolBase, P], Awaitable[R]]:
    """A contract tool: refuses at once once the page is gone, spends a pending screenshot's coordinates (they are
    good for the one call after it), and reports a CDP error nobody expected as an upstream failure."""

    @functools.wraps(method)
    async def call(self: ToolBase, *args: P.args, **kwargs: P.kwargs) -> R:
        self.session.check()
        self._previous_screenshot, self._screenshot_of = self._screenshot_of, None
        try:
            return await method(self, *args, **kwargs)
        except ProtocolError as exc:
            raise BackendError(Failure.upstream, f"{method.__name__}: {exc}") from None

    return call


class ToolBase:
    """What the reading, navigation and input tools share: one bound page and what they remember of it."""

    def __init__(
        self,
        session: PageSession,
        *,
        navigation_timeout: float = 20.0,
        settle_timeout: float = 3.0,
        screenshot_timeout: float = 10.0,
    ) -> None:
        self.session = session
        self.navigation_timeout = navigation_timeout
        self.settle_timeout = settle_timeout
        self.screenshot_timeout = screenshot_timeout
        self.refs = RefTable()
        self.worlds = IsolatedWorlds(session)
        self.cursor = ActionCursor(session)
        self._shared: contextvars.ContextVar[list[PageRead] | None] = contextvars.ContextVar("shared", default=None)
        """Inside `one_read()`: the read this task's tools share (a context variable, so concurrent callers don't)."""
        self._screenshot_of: str | None = None
        """Loader id of the document the last call screenshotted, if the last call was a screenshot."""
        self._previous_screenshot: str | None = None
        self._screenshot_size: tuple[int, int] | None = None
