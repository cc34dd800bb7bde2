"""`find`: a natural-language description → the elements that fit it best, ranked.

Why not a substring match: agents write "add to cart button for the Kestrel Evo daypack" or "country select",
and on a shop page every card has a button called "Add to cart". So each candidate is scored field by field:

- the query's words are matched (whole words, plurals and long prefixes) against the accessible name, the
  placeholder, the description (`aria-describedby`, often the product or row it acts on), the value, the text it
  contains, the label-like names of the containers around it (its card, group, form, row) and its id/name
  attributes — a match in the name weighs most, in the surroundings least;
- role words ("button", "link", "dropdown", "field", "checkbox", …) say which roles are meant: a candidate of such
  a role is boosted, one of another role damped;
- the share of the query that matched scales the score, so an element that fits every word beats one that fits
  the most common words twice; so does the share of the element's name the query asked for ("next page link":
  "Next" before "Page 1").

Ties keep document order. Only candidates with at least one matched word are returned; at most `LIMIT`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from backends.open_claude_chrome.accessibility import AXItem, PageRead, ancestors, descendant_text, shown

LIMIT = 20

STOPWORDS = frozenset(
    {
        "a",
        "an",
        "the",
        "to",
        "for",
        "of",
        "in",
        "on",
        "at",
        "by",
        "with",
        "and",
        "or",
        "from",
        "this",
        "that",
        "my",
        "your",
        "its",
        "it",
        "is",
        "be",
        "please",
        "me",
        "find",
        "click",
        "press",
        "one",
        "which",
        "where",
        "called",
        "named",
        "labelled",
        "labeled",
    }
)
ROLE_WORDS: dict[str, frozenset[str]] = {
    "button": frozenset({"button"}),
    "btn": frozenset({"button"}),
    "link": frozenset({"link"}),
    "anchor": frozenset({"link"}),
    "select": frozenset({"combobox", "listbox"}),
    "dropdown": frozenset({"combobox", "listbox"}),
    "combobox": frozenset({"combobox"}),
    "picker": frozenset({"combobox", "listbox"}),
    "menu": frozenset({"combobox", "menuitem", "menu"}),
    "field": frozenset({"textbox", "searchbox", "combobox", "spinbutton"}),
    "input": frozenset({"textbox", "searchbox", "combobox", "spinbutton", "checkbox", "radio"}),
    "textbox": frozenset({"textbox", "searchbox"}),
    "textarea": frozenset({"textbox"}),
    "box": frozenset({"textbox", "searchbox", "checkbox", "combobox"}),
    "search": frozenset({"searchbox", "search"}),
    "searchbox": frozenset({"searchbox"}),
    "checkbox": frozenset({"checkbox"}),
    "check": frozenset({"checkbox"}),
    "tick": frozenset({"checkbox"}),
    "toggle": frozenset({"switch", "checkbox", "button"}),
    "switch": frozenset({"switch"}),
    "radio": frozenset({"radio"}),
    "option": frozenset({"radio", "option"}),
    "tab": frozenset({"tab"}),
    "heading": frozenset({"heading"}),
    "title": frozenset({"heading"}),
    "image": frozenset({"image", "img"}),
    "picture": frozenset({"image", "img"}),
    "icon": frozenset({"image", "img", "button"}),
    "slider": frozenset({"slider"}),
}
PURE_ROLE_WORDS = frozenset(
    {
        "button",
        "btn",
        "link",
        "dropdown",
        "combobox",
        "field",
        "input",
        "textbox",
        "textarea",
        "box",
        "checkbox",
        "searchbox",
        "radio",
        "slider",
        "picker",
    }
)
"""Words that only name a role; other role words ("search", "menu", "title") may also be content."""

CONTENT_ROLES = frozenset(
    {
        "heading",
        "image",
        "img",
        "cell",
        "row",
        "listitem",
        "article",
        "region",
        "dialog",
        "alert",
        "status",
        "figure",
        "paragraph",
        "group",
        "form",
        "navigation",
        "search",
    }
)
CONTEXT_ROLES = frozenset(
    {
        "article",
        "listitem",
        "group",
        "radiogroup",
        "form",
        "region",
        "dialog",
        "row",
        "navigation",
        "search",
        "banner",
        "contentinfo",
        "complementary",
        "tabpanel",
        "menu",
        "table",
        "list",
        "main",
    }
)

WEIGHTS = {"name": 3.0, "placeholder": 2.5, "description": 2.0, "value": 1.5, "text": 1.5, "context": 1.2, "attrs": 1.0}
ROLE_BOOST = 1.6
ROLE_DAMP = 0.6
INTERACTIVE_BOOST = 1.2
WORD = re.compile(r"[^\W_]+")


def words(text: str) -> list[str]:
    return [w.lower() for w in WORD.findall(text)]


def _stem(word: str) -> str:
    for suffix in ("ies", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)] + ("y" if suffix == "ies" else "")
    return word


def _matches(token: str, stem: str, field: set[str], stems: set[str]) -> bool:
    """Whole word, same stem ("countries"/"country"), or a shared prefix of at least four letters."""
    if token in field or stem in stems:
        return True
    if len(token) < 4:
        return False
    return any(len(word) >= 4 and (word.startswith(token) or token.startswith(word)) for word in field)


@dataclass(frozen=True)
class Candidate:
    item: AXItem
    order: int
    fields: dict[str, set[str]]

    def stems(self, field: str) -> set[str]:
        return {_stem(word) for word in self.fields[field]}


@dataclass(frozen=True)
class Scored:
    item: AXItem
    score: float
    matched: tuple[str, ...]
    """Which fields matched (for the result's `why`)."""


def candidates(read: PageRead) -> list[Candidate]:
    found: list[Candidate] = []
    order = 0
    for root in read.roots:
        for item, _level in shown(root, None):
            order += 1
            if item.backend_id is None or item.role in ("StaticText", "RootWebArea"):
                continue
            if not (item.interactive or (item.name and item.role in CONTENT_ROLES)):
                continue
            attrs = read.attrs(item)
            context: list[str] = []
            for above in ancestors(item):
                if above.role in CONTEXT_ROLES and above.name and not above.ignored:
                    context.append(above.name)
                    if len(context) == 3:
                        break
            fields = {
                "name": set(words(item.name)),
                "placeholder": set(words(attrs.get("placeholder", ""))),
                "description": set(words(item.description)),
                "value": set(words(item.value or "")),
                "text": set(words(descendant_text(item))) if not item.interactive else set(),
                "context": set(words(" ".join(context))),
                "attrs": set(words(" ".join(attrs.get(a, "") for a in ("id", "name", "title", "alt", "rel")))),
            }
            found.append(Candidate(item, order, fields))
    return found


def rank(query: str, pool: list[Candidate]) -> list[Scored]:
    """All candidates with at least one matched word, best first (ties in document order)."""
    tokens = [t for t in words(query) if t not in STOPWORDS]
    roles: set[str] = set()
    for token in tokens:
        roles |= ROLE_WORDS.get(token, frozenset())
    weights = {t: (0.5 if t in PURE_ROLE_WORDS else 1.0) for t in tokens}
    total = sum(weights.values()) or 1.0
    scored: list[tuple[float, int, Scored]] = []
    stems = {token: _stem(token) for token in weights}
    for candidate in pool:
        score = 0.0
        matched_weight = 0.0
        matched: set[str] = set()
        field_stems = {field: candidate.stems(field) for field, words_ in candidate.fields.items() if words_}
        for token, weight in weights.items():
            best = 0.0
            best_field = ""
            for field, stems_of_field in field_stems.items():
                weight_of_field = WEIGHTS[field]
                if weight_of_field > best and _matches(token, stems[token], candidate.fields[field], stems_of_field):
                    best, best_field = weight_of_field, field
            if best:
                score += weight * best
                matched_weight += weight
                matched.add(best_field)
        role = candidate.item.role
        role_hit = bool(roles) and role in roles
        if not score and not role_hit:
            continue
        if not score and weights and any(w == 1.0 for w in weights.values()):
            continue  # the query names content this candidate lacks entirely
        score = (score or 1.0) * (0.5 + matched_weight / total)
        name_words = candidate.fields["name"]
        if name_words:  # "Next" fits "next page link" better than "Page 1" does: more of its name was asked for
            covered = sum(
                1 for word in name_words if any(_matches(t, stems[t], {word}, {_stem(word)}) for t in weights)
            )
            score *= 0.75 + 0.25 * covered / len(name_words)
        if roles:
            score *= ROLE_BOOST if role_hit else ROLE_DAMP
        if candidate.item.interactive:
            score *= INTERACTIVE_BOOST
        scored.append((-score, candidate.order, Scored(candidate.item, score, tuple(sorted(matched)))))
    scored.sort(key=lambda entry: (entry[0], entry[1]))
    return [entry[2] for entry in scored]
