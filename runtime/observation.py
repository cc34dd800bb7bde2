"""Rendering a Snapshot as the bounded text an agent reads.

Budget: an interactive element costs one short line, `[ref] role "name"` plus its state, so a page's elements
cost a handful of tokens each instead of the URLs and ids a raw snapshot carries. What does not fit stays
reachable: `next_offset` continues the same frame's element list.
"""

from __future__ import annotations

from runtime.backend import Element, Snapshot

NAME_CHARS = 60
TEXT_CHARS = {"interactive": 600, "full": 6000}
ELEMENT_CHARS = 6000  # one observation's element list, in characters (≈ 1,500 tokens)


def element_line(element: Element) -> str:
    name = " ".join(element.name.split())
    if len(name) > NAME_CHARS:
        name = name[: NAME_CHARS - 1] + "…"
    line = f'[{element.ref}] {element.role} "{name}"' if name else f"[{element.ref}] {element.role}"
    if element.value:
        value = " ".join(element.value.split())[:40]
        line += f' ="{value}"'
    if element.checked is not None:
        line += " checked" if element.checked else " unchecked"
    if element.disabled:
        line += " disabled"
    return line


def render(snapshot: Snapshot, detail: str, offset: int = 0) -> tuple[str, int | None]:
    """The observation text and, if elements were left out, the offset to continue from."""
    lines = [f"url: {snapshot.url}", f"title: {snapshot.title}"]
    if offset == 0:
        text = " ".join(snapshot.text.split())
        limit = TEXT_CHARS.get(detail, TEXT_CHARS["interactive"])
        if text:
            lines.append("text: " + (text if len(text) <= limit else text[: limit - 1] + "…"))
    total = len(snapshot.elements)
    used, index = 0, offset
    rendered: list[str] = []
    while index < total:
        line = element_line(snapshot.elements[index])
        if rendered and used + len(line) + 1 > ELEMENT_CHARS:
            break
        rendered.append(line)
        used += len(line) + 1
        index += 1
    lines.append(f"elements {offset + 1}-{index} of {total}:" if total else "elements: none")
    lines.extend(rendered)
    next_offset = index if index < total else None
    if next_offset is not None:
        lines.append(f"(more: observe with offset={next_offset} and this frame_id)")
    return "\n".join(lines), next_offset
