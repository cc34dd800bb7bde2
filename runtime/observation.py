"""Rendering a Snapshot as the bounded text an agent reads, and keeping page text from passing for runtime output.

Budget: an interactive element costs one short line, `ref role "name"` plus its state, so a page's elements
cost a handful of tokens each instead of the URLs and ids a raw snapshot carries. The ref starts the line bare:
brackets around it cost one more o200k token per element (`[b`, `ft`, `61`, `]` against `b`, `ft`, `61`), and page
text can never start a line anyway. A continuation (`offset`) repeats neither url nor title: the frame's first read
gave them. One observation is capped (`Settings.observation_tokens`, about 2,000 tokens, estimated by `estimate`):
what does not fit stays reachable, `next_offset` continues the same frame's element list, in the frame's order (the
elements in the viewport first when they do not all fit: `runtime/reading/viewport.py`).

Untrusted content: every string a page controls goes through `runtime/text.py` (`clean`, `quote`) before an
agent reads it.
A `detail=diagnostics` observation adds the Page's latest console errors and failed requests, each a `- ` line of
quoted, cleaned, cut strings inside the frame's marker lines; a request's url loses its credentials, query string
and fragment (where tokens travel), and no header, cookie or body is ever read.
The observation of a frame sits between `<page nonce=…>` and `</page nonce=…>` lines whose nonce is random per
frame: a page cannot know it, and cannot start a line to fake it anyway.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from runtime.backend import Diagnostics, Element, Region, Snapshot
from runtime.delta import Delta
from runtime.scope import Scope
from runtime.text import CUT, NAME_CHARS, ROLE_CHARS, TITLE_CHARS, URL_CHARS, VALUE_CHARS, clean, quote, quoted

DIAGNOSTIC_CHARS = 160
"""Characters of one console error, or of one failed request's url, in a diagnostics observation."""
DIAGNOSTIC_ENTRIES = 10
"""Console errors, and failed requests, shown at most (the latest; the totals are said)."""
TEXT_CHARS = {"interactive": 600, "full": 6000}
OBSERVATION_TOKENS = 2000
"""The default cap of one observation (`Settings.observation_tokens`), in estimated tokens."""
TEXT_SHARE = 0.75
"""At most this share of the cap goes to the page's text (detail=full): the rest is for elements."""
BYTES_PER_TOKEN = 2.5
"""The estimate's rate. Measured with o200k: element lines run 2.9 UTF-8 bytes per token, Chinese 4.3, Russian 7.6,
so the estimate is above the real count for them (a cap of 2,000 is ≈ 1,700 real tokens of element lines). Text
of digits or hex runs nearer 1.2 bytes per token; a page can make its own observation dearer, never longer than
the characters its fields are cut to."""

_ROLE = re.compile(r"[^\w-]")
_STATUS = re.compile(r"[^\w:.-]")
_CREDENTIALS = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^/?#]*@")


def estimate(text: str) -> int:
    """Tokens `text` costs a model, estimated from its UTF-8 size (the runtime carries no tokenizer)."""
    return -(-len(text.encode("utf-8", "replace")) * 2 // int(BYTES_PER_TOKEN * 2))


def element_line(element: Element) -> str:
    role = _ROLE.sub("", clean(element.role, ROLE_CHARS)) or "generic"
    line = f"{element.ref} {role}"
    name = clean(element.name, NAME_CHARS)
    if name:
        line += " " + quoted(name)
    if element.value:
        line += " =" + quote(element.value, VALUE_CHARS)
    if element.checked is not None:
        line += " checked" if element.checked else " unchecked"
    if element.disabled:
        line += " disabled"
    return line


def bare_url(url: str) -> str:
    """`url` without credentials, query string or fragment: what a diagnostics line may show of a request."""
    return _CREDENTIALS.sub(r"\1", url.split("#", 1)[0].split("?", 1)[0])


def diagnostic_lines(diagnostics: Diagnostics) -> list[str]:
    """The Page's latest console errors and failed requests as an observation shows them: the totals, then at most
    `DIAGNOSTIC_ENTRIES` of each, oldest first, every page-controlled string quoted and cut."""
    errors = diagnostics.errors[-DIAGNOSTIC_ENTRIES:]
    failed = diagnostics.failed[-DIAGNOSTIC_ENTRIES:]
    total = max(diagnostics.errors_total, len(diagnostics.errors))
    lines = [f"console errors: {total}" + (f", the last {len(errors)}:" if len(errors) < total else "")]
    lines += ["- " + quote(text, DIAGNOSTIC_CHARS) for text in errors]
    total = max(diagnostics.failed_total, len(diagnostics.failed))
    shown = f", the last {len(failed)}" if len(failed) < total else ""
    lines.append(f"failed requests: {total}{shown} (urls without query)")
    for method, url, status in failed:
        method = _STATUS.sub("", clean(method, 12)) or "?"
        lines.append(f"- {method} {quote(bare_url(url), DIAGNOSTIC_CHARS)} {_STATUS.sub('', clean(status, 40)) or '?'}")
    return lines


def render(
    snapshot: Snapshot,
    detail: str,
    offset: int = 0,
    *,
    cap: int = OBSERVATION_TOKENS,
    order: Sequence[int] | None = None,
    scope: Scope | None = None,
) -> tuple[str, int | None]:
    """The observation text, within `cap` estimated tokens, and, if elements were left out, the offset to continue
    from. `order` lists the elements' positions as they are shown (document order if None); `offset` counts in it.
    At least one element is shown per read, so continuing always ends. A `scope` (`runtime/scope.py`) shows only
    its elements and text, says so on a `scope:` line, and `offset` counts in its elements.

    A first read that does not fit names the largest regions on a `regions` line, so the model can read one of
    them (`within`) instead of paging through everything.

    A frame's view (`runtime.computer_session.View`) carries the frame's nonce, and its text is framed by the marker
    lines; a bare backend Snapshot (a backend's own tests) renders without them."""
    whole = scope or Scope()
    positions = whole.positions(snapshot, order)
    text = whole.text(snapshot, positions)
    shown, next_offset = _render(snapshot, detail, offset, cap, positions, text, order is not None, scope, [])
    # Regions have refs only in a frame's view (the nonce says it is one).
    regions = whole.regions(snapshot) if getattr(snapshot, "nonce", "") else []
    if next_offset is None or offset or not regions:
        return shown, next_offset
    return _render(snapshot, detail, offset, cap, positions, text, order is not None, scope, regions)


def _render(
    snapshot: Snapshot,
    detail: str,
    offset: int,
    cap: int,
    positions: Sequence[int],
    text: str,
    in_view_first: bool,
    scope: Scope | None,
    regions: Sequence[Region],
) -> tuple[str, int | None]:
    nonce = getattr(snapshot, "nonce", "")
    total = len(positions)
    head = [f"<page nonce={nonce}>"] if nonce else []
    if offset == 0:
        head += [f"url: {clean(snapshot.url, URL_CHARS)}", f"title: {clean(snapshot.title, TITLE_CHARS)}"]
        if scope is not None:
            head.append(scope_line(scope, total, len(snapshot.elements)))
        text = _text_within(text, TEXT_CHARS.get(detail, TEXT_CHARS["interactive"]), cap * TEXT_SHARE)
        if text:
            head.append("text: " + text)
        if snapshot.diagnostics is not None:
            head += diagnostic_lines(snapshot.diagnostics)
        if regions:
            head.append("regions (for within): " + ", ".join(region_item(r) for r in regions))
    tail = [f"</page nonce={nonce}>"] if nonce else []
    if snapshot.elements_dropped:
        tail.append(f"({snapshot.elements_dropped:,} more elements of this Page were left out: act on these)")
    more = f"(more: observe with offset={total} and this frame_id)"  # the longest it can be
    left = cap - estimate("\n".join([*head, f"elements {total} of {total}, in view first:", *tail, more]))
    index = offset
    rendered: list[str] = []
    while index < total:
        line = element_line(snapshot.elements[positions[index]])
        cost = estimate(line + "\n")
        if rendered and cost > left:
            break
        rendered.append(line)
        left -= cost
        index += 1
    shown = f"elements {offset + 1}-{index} of {total}" if total else "elements: none"
    lines = [*head, shown + (", in view first:" if in_view_first else ":"), *rendered, *tail]
    next_offset = index if index < total else None
    if next_offset is not None:
        lines.append(f"(more: observe with offset={next_offset} and this frame_id)")
    return "\n".join(lines), next_offset


def scope_line(scope: Scope, shown: int, total: int) -> str:
    """The runtime's line saying what a scoped read shows; the query itself is never repeated."""
    parts = []
    if scope.region is not None:
        parts.append("within " + region_item(scope.region, count=False))
    if scope.words:
        parts.append("matching the query")
    return f"scope: {', '.join(parts)}: {shown} of {total} elements"


def region_item(region: Region, count: bool = True) -> str:
    """`ref role "name" N`: a region as the `regions` and `scope` lines name it (N: the elements it holds)."""
    role = _ROLE.sub("", clean(region.role, ROLE_CHARS)) or "generic"
    item = f"{region.ref} {role}"
    name = clean(region.name, NAME_CHARS)
    if name:
        item += " " + quoted(name)
    return item + (f" {region.end - region.start}" if count else "")


def _text_within(text: str, limit: int, tokens: float) -> str:
    """`clean(text, limit)`, cut shorter if it would cost more than `tokens` (estimated)."""
    cleaned = clean(text, limit)
    room = int(tokens * BYTES_PER_TOKEN) - len(CUT.format(len(text)).encode())
    if estimate(cleaned) <= tokens:
        return cleaned
    if room <= 0:
        return ""
    used = 0
    for chars, char in enumerate(cleaned):
        used += len(char.encode("utf-8", "replace"))
        if used > room:
            return clean(text, chars)
    return cleaned


def render_delta(
    snapshot: Snapshot, before: Snapshot, delta: Delta, detail: str, cap: int = OBSERVATION_TOKENS
) -> str | None:
    """What changed since the act's frame (`before`), as the agent reads it; None when it does not fit in `cap`.

    The lines of changed (`~`) and added (`+`) elements in document order, the refs of removed ones on one line,
    and url, title and text only if they changed; the unchanged elements are counted, their refs stay valid."""
    nonce = getattr(snapshot, "nonce", "")
    counts = f"{len(delta.changed)} changed, {len(delta.added)} added, {len(delta.removed)} removed"
    lines = [f"<page nonce={nonce}>", f"changes: {counts}, {delta.unchanged} unchanged (refs kept)"]
    if snapshot.url != before.url:
        lines.append(f"url: {clean(snapshot.url, URL_CHARS)}")
    if snapshot.title != before.title:
        lines.append(f"title: {clean(snapshot.title, TITLE_CHARS)}")
    limit = TEXT_CHARS.get(detail, TEXT_CHARS["interactive"])
    if clean(snapshot.text, limit) != clean(before.text, limit):
        lines.append("text: " + clean(snapshot.text, limit))
    tail = [f"</page nonce={nonce}>"]
    if snapshot.elements_dropped:
        tail.append(f"({snapshot.elements_dropped:,} more elements of this Page were left out: act on these)")
    if delta.removed:
        tail.insert(0, "- " + " ".join(delta.removed))
    left = cap - estimate("\n".join([*lines, *tail]))
    for position in sorted(delta.changed | delta.added):
        line = ("~ " if position in delta.changed else "+ ") + element_line(delta.elements[position])
        left -= estimate(line + "\n")
        if left < 0:
            return None  # a long change list stops here: the whole frame is the answer
        lines.append(line)
    return "\n".join([*lines, *tail]) if left >= 0 else None
