"""The composed tree: how every reader the runtime owns walks a frame's document the way the Page renders it.

A web component keeps its content in a shadow root, which the DOM's own reads stop at: `document.body.innerText`
leaves out every shadow root's text, `querySelectorAll`, `closest`, `el.form` and `getElementById` do not cross the
boundary either. What the user sees, and what the backends' observations list (an accessibility tree is built from
the rendered tree), is the composed ("flat") tree: a shadow host shows its open shadow root, a `<slot>` shows the
light children assigned to it (its own children only when none is), and the rest of a host's light children are not
shown at all. Measured on Chromium 156: `body.innerText` omits shadow text and puts slotted text where the light DOM
has it, not where its slot shows it.

`COMPOSED` is one small walker in JavaScript, composed into every expression that reads the Page
(`runtime/reading/probe.py` for the text and the structure, `runtime/reading/commit.py` for the element a write goes
through), so the readers cannot disagree on what is on the Page. Closed shadow roots are not reachable by a page's
script, nor by this walker. Bounded: at most `MAX_NODES` nodes visited per read and `MAX_ANCESTORS` steps up.
"""

from __future__ import annotations

MAX_NODES = 300_000
"""Elements one walk visits (the limit the structure read had before it shared this walker)."""
MAX_ANCESTORS = 4096
"""Steps up the composed tree from one element (a closest-ancestor read)."""

COMPOSED = (
    r"""
const composed = (() => {
  const MAX_NODES = """
    + str(MAX_NODES)
    + r""", MAX_ANCESTORS = """
    + str(MAX_ANCESTORS)
    + r""";
  // `start` (a document, an element or a shadow root) and every open shadow root under it, in document order.
  const roots = start => {
    const found = start.shadowRoot ? [start, start.shadowRoot] : [start];
    let seen = 0;
    for (let i = 0; i < found.length && seen < MAX_NODES; i++) {
      const walker = document.createTreeWalker(found[i], NodeFilter.SHOW_ELEMENT);
      for (let el = walker.nextNode(); el && seen++ < MAX_NODES; el = walker.nextNode()) {
        if (el.shadowRoot) found.push(el.shadowRoot);
      }
    }
    return found;
  };
  // Every element matching `selector` in `found` (a list of `roots`; the whole document's by default).
  const all = (selector, found = roots(document)) => found.flatMap(root => [...root.querySelectorAll(selector)]);
  // A node's parent as rendered: the slot it is assigned to, else its parent, else the host of its shadow root.
  const parent = node => node.assignedSlot || (node.parentNode instanceof ShadowRoot ? node.parentNode.host
                                                                                     : node.parentNode);
  const closest = (el, selector) => {
    for (let node = el, i = 0; node && i < MAX_ANCESTORS; node = parent(node), i++) {
      if (node.nodeType === 1 && node.matches(selector)) return node;
    }
    return null;
  };
  // A node's children as rendered: a host's shadow root's, a slot's assigned nodes (its own when none is).
  const children = node => {
    if (node.shadowRoot) return [...node.shadowRoot.childNodes];
    if (node.localName === 'slot') {
      const assigned = node.assignedNodes();
      if (assigned.length) return assigned;
    }
    return [...node.childNodes];
  };
  const separator = display => display === 'contents' || /^(inline|ruby)/.test(display) ? ''
                              : display === 'table-cell' ? '\t' : '\n';
  // The rendered text under `start`, in the composed tree's order, at most `limit` characters. A subtree with no
  // shadow root and no filled slot in it is read by the browser's own `innerText` (exactly what it was before);
  // the walk only goes through the elements on the way to a shadow root or a filled slot.
  const text = (start, limit) => {
    const mixed = new Set();
    const mark = node => {
      for (let i = 0; node && !mixed.has(node) && i < MAX_ANCESTORS; node = parent(node), i++) {
        mixed.add(node);
        if (node === start) break;
      }
    };
    for (const root of roots(start)) {
      if (root !== start && root.host) mark(root.host);
      for (const slot of root.querySelectorAll('slot')) if (slot.assignedNodes().length) mark(slot);
    }
    if (start.localName === 'slot' && start.assignedNodes().length) mark(start);
    if (!mixed.has(start)) {
      return ((start.innerText === undefined ? start.textContent : start.innerText) || '').slice(0, limit);
    }
    const out = [];
    let size = 0, seen = 0;
    const push = part => { if (part) { out.push(part); size += part.length; } };
    const walk = node => {
      if (size >= limit || seen++ >= MAX_NODES) return;
      if (node.nodeType === 3) {
        const style = node.parentElement ? getComputedStyle(node.parentElement) : null;
        if (!style || style.visibility !== 'hidden') push(node.data.replace(/\s+/g, ' '));
        return;
      }
      if (node.nodeType !== 1) return;
      const display = getComputedStyle(node).display;
      if (display === 'none') return;
      if (node.localName === 'br') return push('\n');
      const edge = separator(display);
      push(edge);
      if (mixed.has(node) || display === 'contents') {
        for (const child of children(node)) walk(child);
      } else {
        push(node.innerText);
      }
      push(edge);
    };
    if (start.nodeType === 1) walk(start); else for (const child of start.childNodes) walk(child);
    return out.join('').replace(/[ \t]*\n[\s]*/g, '\n').trim().slice(0, limit);
  };
  return {roots, all, parent, closest, children, text};
})();
"""
)
"""Defines `composed` (`roots`, `all`, `parent`, `closest`, `children`, `text`) in the expression it starts."""


def page_text(limit: int) -> str:
    """An expression: the frame's rendered text, open shadow roots included, at most `limit` characters."""
    start = "document.body || document.documentElement"
    return f"(() => {{ {COMPOSED} const start = {start}; return start ? composed.text(start, {int(limit)}) : ''; }})()"
