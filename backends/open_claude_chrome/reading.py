"""The contract's reading tools: `read_page`, `find`, `get_page_text`. Reads take no screenshot; refs they hand
out are re-checked before any use (`refs.py`)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Literal

from backends.open_claude_chrome import accessibility, find
from backends.open_claude_chrome.accessibility import AXItem, PageRead
from backends.open_claude_chrome.tools import ToolBase, tool
from runtime.backend import BackendError, Failure

READ_PAGE_MAX_CHARS = 50_000
READ_PAGE_DEPTH = 15


@dataclass(frozen=True)
class PageNode:
    """One line of a `read_page` answer, structured."""

    ref: str | None
    role: str
    name: str
    level: int
    interactive: bool
    value: str | None = None
    checked: bool | None = None
    disabled: bool = False


@dataclass(frozen=True)
class ReadPageResult:
    url: str
    title: str
    text: str
    """The tree as text: `role "name" [ref_N] attrs`, one node per line (indented by level for `filter="all"`)."""
    nodes: tuple[PageNode, ...]


@dataclass(frozen=True)
class FindMatch:
    ref: str
    role: str
    name: str
    score: float
    why: str


@dataclass(frozen=True)
class FindResult:
    query: str
    matches: tuple[FindMatch, ...]
    total: int
    """How many elements matched at all; only the best `find.LIMIT` are in `matches`."""

    @property
    def text(self) -> str:
        lines = [f'- {m.ref} {m.role} "{m.name}" ({m.why})' for m in self.matches]
        if self.total > len(self.matches):
            lines.append(f"{self.total} elements match; showing the best {len(self.matches)}. Be more specific.")
        return "\n".join(lines) if lines else f"No element matches {self.query!r}."


@dataclass(frozen=True)
class PageTextResult:
    url: str
    title: str
    text: str


class ReadTools(ToolBase):
    @contextlib.asynccontextmanager
    async def one_read(self) -> AsyncIterator[None]:
        """Within this block every read tool answers from one read of the page (an observation costs one read)."""
        token = self._shared.set([])
        try:
            yield
        finally:
            self._shared.reset(token)

    async def _read(self) -> PageRead:
        shared = self._shared.get()
        if shared:
            return shared[0]
        await self.session.settle(self.settle_timeout)
        read = await accessibility.read(self.session)
        self.refs.prune(read)
        if shared is not None:
            shared.append(read)
        return read

    @tool
    async def read_page(
        self,
        filter: Literal["interactive", "all"] = "all",
        depth: int | None = READ_PAGE_DEPTH,
        ref_id: str | None = None,
        max_chars: int = READ_PAGE_MAX_CHARS,
    ) -> ReadPageResult:
        """The accessibility tree as text with refs. `filter="interactive"`: controls only, one per line;
        `"all"`: every shown node, indented. `ref_id` reads that element's subtree; `depth` bounds the levels;
        an answer over `max_chars` is an error that says to narrow it (as the contract does)."""
        read = await self._read()
        roots = read.roots
        if ref_id is not None:
            identity = self.refs.get(ref_id)
            start = read.find_backend(identity.frame_id, identity.backend_id)
            if start is None or read.loaders.get(identity.frame_id) != identity.loader_id:
                raise BackendError(Failure.stale, f"{ref_id} is no longer in the page")
            roots = [start]
        nodes: list[PageNode] = []
        lines: list[str] = []
        for root in roots:
            for item, level in accessibility.shown(root, depth):
                if filter == "interactive" and not item.interactive:
                    continue
                if item.role == accessibility.TEXT_ROLE:
                    parent_name = " ".join((item.parent.name if item.parent is not None else "").split())
                    if filter == "all" and item.name.strip() and " ".join(item.name.split()) != parent_name:
                        shown_text = json.dumps(" ".join(item.name.split()), ensure_ascii=False)
                        lines.append(" " * level + "text " + shown_text)
                    continue
                ref = self._ref_for(read, item)
                node = PageNode(
                    ref,
                    item.role,
                    " ".join(item.name.split()),
                    level,
                    item.interactive,
                    item.shown_value,
                    item.checked,
                    item.disabled,
                )
                nodes.append(node)
                indent = "" if filter == "interactive" else " " * level
                lines.append(indent + _line(node, item, read))
        text = "\n".join(lines)
        if len(text) > max_chars:
            raise BackendError(
                Failure.upstream,
                f"read_page output is {len(text):,} characters, over max_chars={max_chars:,}: pass a smaller depth, "
                "filter='interactive', or a ref_id to read part of the page",
            )
        return ReadPageResult(read.url, read.title, text, tuple(nodes))

    def _ref_for(self, read: PageRead, item: AXItem) -> str | None:
        facts = read.facts(item)
        if facts is None:
            return None
        return self.refs.assign(read, item, facts)

    @tool
    async def find(self, query: str) -> FindResult:
        """Up to `find.LIMIT` elements matching a natural-language description, best first."""
        if not query.strip():
            raise BackendError(Failure.upstream, "find needs a query")
        read = await self._read()
        ranked = find.rank(query, find.candidates(read))
        matches: list[FindMatch] = []
        for scored in ranked:
            ref = self._ref_for(read, scored.item)
            if ref is None:
                continue
            why = "matches " + ", ".join(scored.matched) if scored.matched else "role"
            matches.append(FindMatch(ref, scored.item.role, " ".join(scored.item.name.split()), scored.score, why))
            if len(matches) == find.LIMIT:
                break
        return FindResult(query, tuple(matches), len(ranked))

    @tool
    async def get_page_text(self) -> PageTextResult:
        """The page's text, main content first, as plain lines (headings marked with `#`)."""
        read = await self._read()
        return PageTextResult(read.url, read.title, "\n".join(accessibility.text_lines(read)))


def _line(node: PageNode, item: AXItem, read: PageRead) -> str:
    parts = [node.role]
    if node.name:
        parts.append(json.dumps(node.name, ensure_ascii=False))
    if node.ref:
        parts.append(f"[{node.ref}]")
    facts = read.facts(item)
    attrs = facts.attrs if facts is not None else {}
    if node.value is not None:
        parts.append("value=" + json.dumps(node.value[:80], ensure_ascii=False))
    if node.checked is not None:
        parts.append("checked" if node.checked else "unchecked")
    if node.disabled:
        parts.append("disabled")
    placeholder = attrs.get("placeholder")
    if placeholder and placeholder != node.name:
        parts.append("placeholder=" + json.dumps(placeholder, ensure_ascii=False))
    if node.role == "link" and attrs.get("href"):
        parts.append("href=" + json.dumps(attrs["href"], ensure_ascii=False))
    return " ".join(parts)
