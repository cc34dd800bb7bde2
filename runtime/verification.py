"""Evaluating an Assertion on the live Page with the runtime's own probe. Returns what did not hold."""

from __future__ import annotations

from runtime.models import Assertion
from runtime.models.assertion import compile_pattern
from runtime.probe import PageProbe, ax_property
from runtime.session import Frame


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
        return (
            []
            if matches(assertion.pattern or "", actual)
            else [f"{kind}: {excerpt(actual)!r} does not match {assertion.pattern!r}"]
        )
    if kind in ("text_present", "text_absent"):
        text = " ".join((await probe.text()).split())
        needle = " ".join((assertion.text or "").split())
        present = needle in text
        if present == (kind == "text_present"):
            return []
        return [f"{kind}: {needle!r} is {'present' if present else 'absent'}"]
    if kind == "element_count":
        nodes = await probe.ax_nodes(assertion.role or "", assertion.name)
        if len(nodes) == assertion.count:
            return []
        return [
            f"element_count: {len(nodes)} {assertion.role} {assertion.name or ''} found, expected {assertion.count}"
        ]
    return await _element_state(assertion, probe, frame)


EXCERPT = 200
"""Characters of a page's url or title quoted in a failure: the rest is counted, not copied."""


def excerpt(text: str) -> str:
    return text if len(text) <= EXCERPT else f"{text[:EXCERPT]}…({len(text) - EXCERPT} more characters)"


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
            return [f"element_state: ref {assertion.ref} is not in the latest frame"]
        role, name, ordinal = element.role, element.name, frame.ordinal(element)  # type: ignore[union-attr]
    nodes = await probe.ax_nodes(role or "", name)
    if len(nodes) <= ordinal:
        return [f"element_state: no {role} {name!r} on the live Page"]
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
    return [f"element_state: {role} {name!r} {state} is {actual!r}, expected {assertion.expected!r}"]
