"""Evaluating an Assertion on the live Page with the runtime's own probe. Returns what did not hold.

A failure quotes the page's url, title, names and values, and the assertion's own strings, through
`runtime.text.quote`: cleaned, cut at `FAILURE_CHARS` (200) with the cut marker, quotes escaped. `failures` is
untrusted page data like the observation (the tool description says so); the message never quotes it.
"""

from __future__ import annotations

from runtime.computer_session import Frame
from runtime.models import Assertion
from runtime.models.assertion import compile_pattern
from runtime.reading.probe import PageProbe, ax_property
from runtime.text import FAILURE_CHARS, quote


async def failures(assertion: Assertion, probe: PageProbe, frame: Frame | None) -> list[str]:
    """An empty list means the assertion holds. Never empty for an assertion that checked nothing."""
    kind = assertion.type
    if kind == "all_of":
        out: list[str] = []
        for part in assertion.of or []:
            out += await failures(part, probe, frame)
        return out
    if kind == "any_of":
        collected: list[str] = []
        for part in assertion.of or []:
            failed = await failures(part, probe, frame)
            if not failed:
                return []
            collected += failed
        return [f"none of {len(assertion.of or [])} alternatives held: " + "; ".join(collected)]
    if kind in ("url_matches", "title_matches"):
        what = "location.href" if kind == "url_matches" else "document.title"
        actual = await probe.evaluate(what) or ""
        if matches(assertion.pattern or "", actual):
            return []
        return [
            f"{kind}: {quote(actual, FAILURE_CHARS)} does not match {quote(assertion.pattern or '', FAILURE_CHARS)}"
        ]
    if kind in ("text_present", "text_absent"):
        text = " ".join((await probe.text()).split())
        needle = " ".join((assertion.text or "").split())
        present = needle in text
        if present == (kind == "text_present"):
            return []
        return [f"{kind}: {quote(needle, FAILURE_CHARS)} is {'present' if present else 'absent'}"]
    if kind == "element_count":
        nodes = await probe.ax_nodes(assertion.role or "", assertion.name)
        if len(nodes) == assertion.count:
            return []
        what = f"{quote(assertion.role or '', FAILURE_CHARS)} {quote(assertion.name or '', FAILURE_CHARS)}"
        return [f"element_count: {len(nodes)} {what} found, expected {assertion.count}"]
    return await _element_state(assertion, probe, frame)


def matches(pattern: str, text: str) -> bool:
    """RE2 search: linear in the text, so a page's long title and a model's pattern cannot hold the event loop the
    way a backtracking engine does. A lone surrogate from the page (which RE2, working on UTF-8, cannot take) is
    matched as U+FFFD."""
    subject = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return compile_pattern(pattern).search(subject) is not None


async def _element_state(assertion: Assertion, probe: PageProbe, frame: Frame | None) -> list[str]:
    role, name, ordinal = assertion.role, assertion.name, 0
    if assertion.ref is not None:
        element = frame.element(assertion.ref) if frame is not None else None
        if element is None:
            return [f"element_state: ref {quote(assertion.ref, FAILURE_CHARS)} is not in the latest frame"]
        role, name, ordinal = element.role, element.name, frame.ordinal(element)  # type: ignore[union-attr]
    nodes = await probe.ax_nodes(role or "", name)
    what = f"{quote(role or '', FAILURE_CHARS)} {quote(name or '', FAILURE_CHARS)}"
    if len(nodes) <= ordinal:
        return [f"element_state: no {what} on the live Page"]
    node = nodes[ordinal]
    state = assertion.state
    if state == "checked":
        actual: object = ax_property(node, "checked") in ("true", True)
    elif state == "enabled":
        actual = not ax_property(node, "disabled")
    elif state == "visible":
        actual = await probe.is_visible(node["backendDOMNodeId"])
    else:
        actual = (node.get("value") or {}).get("value", "")
    if actual == assertion.expected:
        return []
    return [f"element_state: {what} {state} is {_shown(actual)}, expected {_shown(assertion.expected)}"]


def _shown(value: object) -> str:
    return quote(value, FAILURE_CHARS) if isinstance(value, str) else repr(value)
