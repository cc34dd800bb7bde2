"""Parse a `browser_snapshot` answer of @playwright/mcp 0.0.83 into a normalized `Snapshot`.

The answer is markdown in sections (`### Page`, `### Snapshot`, `### Modal state`, `### Error`, ...). The snapshot
is Playwright's "ai" ARIA rendering, a YAML sequence written line by line by `renderAriaSnapshotAsYaml`:

    - <key>                    leaf
    - <key>: <value>           a node with one text child (value YAML-escaped when needed)
    - <key>:                   a node with children / props on the following, deeper lines
    - text: <value>            a text node
    - /url: <value>            a prop of the parent (url, placeholder)

where <key> is `role "json-escaped name" [attr] [attr=value] [ref=e3] [cursor=pointer]`, single-quoted as a whole
(`'...'`, with `''` for a quote) when YAML needs it. Refs are `e<N>`, or `f<N>e<M>` for other frames and for a
main frame after navigation; the upstream resolves both (`aria-ref=`), so they are kept as they are.

Only this line grammar is parsed (no YAML library): it is what the renderer emits, and nothing on the page can
change the structure, since every page string goes through the escaping above.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from backends.common.normalize import AriaNode, compact, normalize
from runtime.backend import Snapshot

__all__ = ["REF", "AriaSnapshotError", "normalize", "parse_aria", "parse_snapshot_answer"]

REF = re.compile(r"^(?:f\d+)?e\d+$")
"""The upstream's own ref syntax. Anything else it would treat as a CSS/Playwright selector: never pass one."""

_SECTION = re.compile(r"^### (.+)$", re.MULTILINE)
_LINE = re.compile(r"^( *)- (.*)$")
_ROLE = re.compile(r"[A-Za-z]+")
_ATTR = re.compile(r"\[([A-Za-z-]+)(?:=([^\]\s]*))?\]")


class AriaSnapshotError(ValueError):
    """The upstream answer does not have the shape this parser knows."""


@dataclass(frozen=True)
class MarkdownSections:
    """One upstream text answer split into its markdown sections."""

    sections: dict[str, str]

    @classmethod
    def parse(cls, text: str) -> MarkdownSections:
        sections: dict[str, str] = {}
        matches = list(_SECTION.finditer(text))
        for i, match in enumerate(matches):
            end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
            sections[match.group(1).strip()] = text[match.end() : end].strip("\n")
        return cls(sections)

    def page_field(self, label: str) -> str:
        for line in self.sections.get("Page", "").split("\n"):
            prefix = f"- {label}: "
            if line.startswith(prefix):
                return line[len(prefix) :].strip()
        return ""

    def snapshot_yaml(self, workdir: Path | None = None) -> str:
        """The ARIA YAML, inline (```yaml fenced) or, if the upstream wrote it to a file, read from its workdir."""
        body = self.sections.get("Snapshot")
        if body is None:
            raise AriaSnapshotError("the answer has no ### Snapshot section")
        fenced = re.search(r"```(?:yaml)?\n(.*?)\n?```", body, re.DOTALL)
        if fenced:
            return fenced.group(1)
        linked = re.fullmatch(r"- \[Snapshot\]\(([^)]+)\)", body.strip())
        if linked and workdir is not None:
            root = workdir.resolve()
            path = (root / linked.group(1)).resolve()
            if not path.is_relative_to(root):
                raise AriaSnapshotError(f"snapshot file outside the workdir: {linked.group(1)}")
            return path.read_text(encoding="utf-8")
        raise AriaSnapshotError("unrecognized ### Snapshot section")


# -- YAML line grammar ---------------------------------------------------------------------------------------------


def _single_quoted(entry: str) -> tuple[str, str]:
    """Split `'it''s a key': rest` into ("it's a key", ": rest")."""
    i, out = 1, []
    while i < len(entry):
        ch = entry[i]
        if ch == "'":
            if entry[i + 1 : i + 2] == "'":
                out.append("'")
                i += 2
                continue
            return "".join(out), entry[i + 1 :]
        out.append(ch)
        i += 1
    raise AriaSnapshotError(f"unterminated quoted key: {entry[:80]!r}")


_ESCAPES = {"\\": "\\", '"': '"', "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "/": "/", "0": "\0"}


def _double_quoted(value: str) -> str:
    """Decode a YAML double-quoted scalar as the renderer writes it (JSON-like escapes plus \\xNN)."""
    if len(value) < 2 or not value.endswith('"'):
        raise AriaSnapshotError(f"unterminated quoted value: {value[:80]!r}")
    body, out, i = value[1:-1], [], 0
    while i < len(body):
        ch = body[i]
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        nxt = body[i + 1 : i + 2]
        if nxt == "x":
            out.append(chr(int(body[i + 2 : i + 4], 16)))
            i += 4
        elif nxt == "u":
            out.append(chr(int(body[i + 2 : i + 6], 16)))
            i += 6
        else:
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
    return "".join(out)


def _scalar(value: str) -> str:
    return _double_quoted(value) if value.startswith('"') else value


def _split_entry(entry: str) -> tuple[str, str | None, bool]:
    """(key, inline value or None, has_children) of one `- ...` entry."""
    if entry.startswith("'"):
        key, rest = _single_quoted(entry)
    else:
        cut = entry.find(": ")
        if cut >= 0:
            key, rest = entry[:cut], entry[cut:]
        elif entry.endswith(":"):
            key, rest = entry[:-1], ":"
        else:
            key, rest = entry, ""
    if rest == "":
        return key, None, False
    if rest == ":":
        return key, None, True
    if rest.startswith(": "):
        return key, _scalar(rest[2:]), False
    raise AriaSnapshotError(f"unexpected text after key: {entry[:80]!r}")


def _parse_key(key: str) -> tuple[str, str, dict[str, str]]:
    """`button "Save" [disabled] [ref=e3]` -> ("button", "Save", {"disabled": "", "ref": "e3"})."""
    role_match = _ROLE.match(key)
    if not role_match:
        raise AriaSnapshotError(f"no role in key: {key[:80]!r}")
    role, pos, name = role_match.group(0), role_match.end(), ""
    rest = key[pos:].lstrip(" ")
    if rest.startswith('"'):
        decoder = json.JSONDecoder()
        try:
            name, used = decoder.raw_decode(rest)
        except json.JSONDecodeError as exc:
            raise AriaSnapshotError(f"bad name in key: {key[:80]!r}") from exc
        rest = rest[used:]
    elif rest.startswith("/"):  # a regex name (not emitted in "ai" mode); keep it verbatim
        end = rest.find("/ [")
        name, rest = (rest, "") if end < 0 else (rest[: end + 1], rest[end + 1 :])
    attrs = {m.group(1): m.group(2) or "" for m in _ATTR.finditer(rest)}
    return role, name, attrs


def parse_aria(yaml_text: str) -> list[AriaNode]:
    """The ARIA YAML as a forest of nodes, in document order."""
    roots: list[AriaNode] = []
    stack: list[AriaNode] = []
    for raw in yaml_text.split("\n"):
        if not raw.strip():
            continue
        match = _LINE.match(raw)
        if not match:
            raise AriaSnapshotError(f"not a sequence item: {raw[:80]!r}")
        depth = len(match.group(1)) // 2
        key, value, _ = _split_entry(match.group(2))
        while stack and stack[-1].depth >= depth:
            stack.pop()
        parent = stack[-1] if stack else None
        if key.startswith("/"):
            if parent is not None:
                parent.props[key[1:]] = value or ""
            continue
        if key == "text":
            node = AriaNode("text", text=value or "", depth=depth)
        else:
            role, name, attrs = _parse_key(key)
            node = AriaNode(role, name, attrs, value, depth=depth)
        (parent.children if parent is not None else roots).append(node)
        stack.append(node)
    return roots


# -- answer -> Snapshot (the normalization itself is shared: backends.common.normalize) ------------------------------


def parse_snapshot_answer(text: str, workdir: Path | None = None) -> Snapshot:
    """A whole `browser_snapshot` answer (markdown) -> Snapshot."""
    answer = MarkdownSections.parse(text)
    snapshot = normalize(
        answer.page_field("Page URL"),
        answer.page_field("Page Title"),
        parse_aria(answer.snapshot_yaml(workdir)),
        upstream_chars=len(text),
    )
    modal = answer.sections.get("Modal state")
    if modal:
        # A dialog or file chooser blocks the page; the runtime must see it (the backend never handles it).
        extra = "\n".join(f"[modal] {compact(line.lstrip('- '))}" for line in modal.split("\n") if line.strip())
        snapshot = Snapshot(
            snapshot.url, snapshot.title, (extra + "\n" + snapshot.text).strip(), snapshot.elements, len(text)
        )
    return snapshot
