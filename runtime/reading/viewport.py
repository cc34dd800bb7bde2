"""The elements in the viewport first: when a frame's elements do not fit in one observation, the agent reads
first what the user sees, then the rest in document order (`next_offset` continues in that order).

No backend says where its elements are, so the runtime's own probe (`IN_VIEW_JS`) lists the interactive
elements that intersect the viewport, each with its index among the Page's interactive elements and a cheap name,
and each is matched to the backend element of the same name nearest its scaled index. What the probe and a backend
call interactive, or how they name it, may differ: an element not matched stays in document order. The order
changes only which elements come first; every element stays reachable, and a wrong match costs no safety.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

from runtime.backend import Element
from runtime.reading.commit import loose
from runtime.text import NAME_CHARS

DRAWN_MIN = (160, 120)
"""CSS px (width, height) of a drawn surface's visible part at least: a seat map or a chart, not an icon."""
DRAWN_JS = f"""
(() => {{
  const [minW, minH] = [{DRAWN_MIN[0]}, {DRAWN_MIN[1]}];
  for (const el of document.querySelectorAll('canvas, img[usemap]')) {{
    const r = el.getBoundingClientRect();
    const w = Math.min(r.right, innerWidth) - Math.max(r.left, 0);
    const h = Math.min(r.bottom, innerHeight) - Math.max(r.top, 0);
    const style = getComputedStyle(el);
    if (w >= minW && h >= minH && style.visibility === 'visible' && Number(style.opacity) > 0) return true;
  }}
  return false;
}})()
"""
"""Whether the viewport shows a drawn surface: a canvas or an image map with at least `DRAWN_MIN` of it visible.
Read by the runtime's probe in its own world, so a page's words cannot claim one; a page that draws one anyway
gets at most the one screenshot an observation may carry."""
IN_VIEW_MAX = 400
"""In-view elements the probe reports at most (a viewport of a dense page holds a few hundred)."""
NEAREST = 64
"""Candidates of one name tried around the scaled index (a page of 2,000 identical buttons stays linear)."""

IN_VIEW_JS = rf"""
(() => {{
  const all = document.querySelectorAll(
    'a[href],button,input:not([type=hidden]),select,textarea,summary,[contenteditable=""],[contenteditable=true],' +
    '[role=button],[role=link],[role=checkbox],[role=radio],[role=tab],[role=menuitem],[role=option],' +
    '[role=switch],[role=textbox],[role=searchbox],[role=combobox],[role=slider]');
  const h = innerHeight, w = innerWidth;
  const inView = r => r.width > 0 && r.height > 0 && r.bottom > 0 && r.right > 0 && r.top < h && r.left < w;
  const text = el => el.getAttribute('aria-label') ||
    (el.getAttribute('aria-labelledby') || '').split(/\s+/).map(id => document.getElementById(id)?.textContent || '')
      .join(' ').trim() ||
    [...(el.labels || [])].map(label => label.textContent).join(' ').trim() ||
    (el.textContent || '').trim() || el.querySelector('img[alt]')?.alt ||
    el.getAttribute('title') || el.getAttribute('placeholder') || (el.type === 'submit' ? el.value : '') || '';
  // Dense pages: the first element not above the viewport, by bisection (document order runs top to bottom on
  // most pages); the first few elements are read too, for a fixed header.
  let start = 0;
  if (all.length > 2000) {{
    let lo = 0, hi = all.length;
    while (lo < hi) {{
      const mid = (lo + hi) >> 1;
      if (all[mid].getBoundingClientRect().bottom <= 0) lo = mid + 1; else hi = mid;
    }}
    start = lo;
  }}
  const items = [];
  const visit = i => {{
    if (items.length < {IN_VIEW_MAX} && inView(all[i].getBoundingClientRect()))
      items.push([i, text(all[i]).replace(/\s+/g, ' ').slice(0, {NAME_CHARS})]);
  }};
  for (let i = 0; i < Math.min(start, 50); i++) visit(i);
  for (let i = start; i < all.length && i < start + 4000 && items.length < {IN_VIEW_MAX}; i++) {{
    if (all.length > 2000 && all[i].getBoundingClientRect().top >= h) break;
    visit(i);
  }}
  return {{ total: all.length, items }};
}})()
"""


def _key(name: str) -> str:
    """A name as both sides may give it: `loose` (as the policy compares names), at the length the probe sends."""
    return loose(name)[:NAME_CHARS]


def in_view_first(elements: Sequence[Element], total: int, items: Sequence[Sequence[object]]) -> list[int] | None:
    """The positions of `elements` with the matched in-view ones first (in document order), then the rest; None
    when nothing matched. `items` are the probe's `[index, name]` pairs among its `total` interactive elements."""
    by_name: dict[str, list[int]] = {}
    for position, element in enumerate(elements):
        key = _key(element.name)
        if key:
            by_name.setdefault(key, []).append(position)
    scale = len(elements) / max(total, 1)
    picked: set[int] = set()
    for item in items:
        index, name = item[0], item[1]
        if not isinstance(index, int) or not isinstance(name, str):
            continue
        candidates = by_name.get(_key(name))
        if candidates:
            nearest = _nearest_free(candidates, index * scale, picked)
            if nearest is not None:
                picked.add(nearest)
    if not picked:
        return None
    front = sorted(picked)
    return front + [position for position in range(len(elements)) if position not in picked]


def _nearest_free(candidates: list[int], guess: float, picked: set[int]) -> int | None:
    """The candidate position nearest `guess` not picked yet, among the `NEAREST` on either side."""
    middle = bisect_left(candidates, guess)
    around = candidates[max(0, middle - NEAREST) : middle + NEAREST]
    free = [position for position in around if position not in picked]
    return min(free, key=lambda position: abs(position - guess)) if free else None
