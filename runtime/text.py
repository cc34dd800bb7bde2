"""Page text as an agent may read it: cleaned, cut at fixed limits, quoted; a leaf every model and renderer reads.

Untrusted content: every string a page controls (names, values, url, title, text, previews, assertion failures)
goes through `clean` before an agent reads it, so none can start a line, close a quote, or break the transport:
- lone UTF-16 surrogates (a title set by script to "\\ud800") and undecodable bytes become U+FFFD, so every result
  encodes as UTF-8 (JSON over stdio and HTTP);
- C0/C1 controls, U+2028/U+2029 and other line breaks become spaces and runs of whitespace one space: page text
  never starts a line of its own;
- invisible format characters (bidi controls, zero-width spaces, BOM, Unicode tag characters) are dropped: they can
  reorder or hide what a reader sees;
- `‹` and `›` become `<` and `>`: the two are the runtime's own, for the cut marker `‹+N›` (N more characters were
  cut), so a page can neither pass a cut string off as whole nor whole text as cut (4 o200k tokens; `⟦+N⟧` costs 8);
- inside a quoted name or value (`quote`), `\\` and `"` are escaped, so `Save" checked` stays one name.
"""

from __future__ import annotations

NAME_CHARS = 60
VALUE_CHARS = 40
ROLE_CHARS = 32
URL_CHARS = 500
TITLE_CHARS = 200
PREVIEW_CHARS = 160
FAILURE_CHARS = 200
"""Characters of a page's url, title, name or value quoted in a verification failure."""

CUT = "‹+{}›"

_BREAKS = [*range(0x00, 0x20), *range(0x7F, 0xA0), 0x2028, 0x2029]
_INVISIBLE = [
    0x00AD,  # soft hyphen
    0x061C,  # Arabic letter mark
    0x180E,  # Mongolian vowel separator
    0x200B,  # zero-width space (ZWNJ and ZWJ stay: scripts and emoji need them)
    0x200E,  # LRM
    0x200F,  # RLM
    *range(0x202A, 0x202F),  # LRE, RLE, PDF, LRO, RLO
    *range(0x2060, 0x2065),  # word joiner, invisible operators
    *range(0x2066, 0x2070),  # LRI, RLI, FSI, PDI and the deprecated format characters
    0xFEFF,  # BOM / zero-width no-break space
    *range(0xFFF9, 0xFFFC),  # interlinear annotation
    *range(0xE0000, 0xE0080),  # tag characters: invisible ASCII look-alikes
]
_TABLE: dict[int, str | None] = {
    **dict.fromkeys(_BREAKS, " "),
    **dict.fromkeys(_INVISIBLE),
    ord("‹"): "<",
    ord("›"): ">",
}


def well_formed(text: str) -> str:
    """`text` with every lone surrogate (from a page's UTF-16, or bytes decoded with `surrogateescape`) as U+FFFD,
    and split pairs joined: it encodes as UTF-8."""
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def clean(text: str, limit: int) -> str:
    """`text` as an agent may read it: valid Unicode, one line, nothing invisible, at most `limit` characters
    followed by the cut marker `‹+N›` when longer. Cut on code points, after cleaning."""
    text = " ".join(well_formed(text).translate(_TABLE).split())
    if len(text) > limit:
        text = text[:limit] + CUT.format(len(text) - limit)
    return text


def quote(text: str, limit: int) -> str:
    """`clean(text)` in double quotes, `\\` and `"` escaped (after the cut, so a cut cannot split an escape)."""
    return quoted(clean(text, limit))


def quoted(cleaned: str) -> str:
    return '"' + cleaned.replace("\\", "\\\\").replace('"', '\\"') + '"'
