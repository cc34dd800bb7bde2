"""The task-cost set as data: each task names the Pages it opens and its steps in intent form (read until a needle
is seen, click / type into / select in the element named X, press a key, turn to another of its Pages), and what
proves it happened (the answer the driver must have read, the writes the ledger must hold, the state the Page must
be left in). Three drivers run the same steps (`suites/bench/drivers.py`): our `computer_use`, and the raw
`@playwright/mcp` and `chrome-devtools-mcp` through their own tools.

Pure: the steps, the task set, how each driver finds "the element named X" in its own snapshot text, how our
`observe` arguments are built, and the cost arithmetic. Nothing here touches a browser.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fixtures_sites.scenarios import canvas
from lab.costs import DRIVERS as COST_DRIVERS
from lab.costs import TASK_COST
from lab.tokens import count_text

DRIVERS = tuple(key for key, _ in COST_DRIVERS)
OURS, PLAYWRIGHT, DEVTOOLS = DRIVERS
RECORD = TASK_COST
"""Cost records of this suite: `taskcost-<task>-<driver>` in reports/costs/ (`lab.costs` renders them)."""


# -- steps -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Read:
    """Read the current Page until `needle` has been seen. `text`: the needle is page text, not an element's name
    (our driver then reads with detail=full)."""

    needle: str
    text: bool = False


@dataclass(frozen=True)
class Click:
    """Click the element whose name contains `name` (of `role`, if given; the first after the line holding `after`,
    if given: the "Add to cart" of one product among hundreds). `handover`: our runtime hands this to the user."""

    name: str
    role: str | None = None
    after: str | None = None
    handover: bool = False


@dataclass(frozen=True)
class Type:
    name: str
    text: str
    role: str | None = None
    submit: bool = False
    handover: bool = False


@dataclass(frozen=True)
class Select:
    name: str
    value: str
    role: str | None = "combobox"


@dataclass(frozen=True)
class Press:
    key: str


@dataclass(frozen=True)
class Look:
    """Look at the current Page: ours observes with `detail=visual` (the frame and one viewport screenshot)."""


@dataclass(frozen=True)
class ClickAt:
    """Click a point a model finds in the screenshot it was just sent; the lab stands in for its eyes with
    `point`, a JS expression the Page evaluates to `{x, y}` in viewport CSS px."""

    point: str


@dataclass(frozen=True)
class Open:
    """Turn to the task's Page `index` (0-based): ours observes it by its handle, a raw driver navigates its tab."""

    index: int


Step = Read | Click | Type | Select | Press | Look | ClickAt | Open


@dataclass(frozen=True)
class Task:
    """One task of the cost set.

    `answer`: the string the driver must have read after its last act (else it reads once more: ours verifies it,
    a raw driver snapshots); None for tasks whose proof is a write or a hand-over. `writes`: the ledger paths ours
    must produce, in order (`raw_writes` where a raw driver does what ours hands to the user). `settle`: a JS
    condition the lab waits for (bounded, in the Page, not counted) before the answer is checked, for Pages that
    answer asynchronously. `check`: a JS expression that must hold on the first Page at the end; `popup`: the first
    Page must have opened a popup. `raw`: why the raw upstreams have no equivalent (their rows are then "n/a", never
    a cost); `na`: why no driver has a figure; `note`: shown beside the row."""

    name: str
    group: str
    pages: tuple[str, ...]
    steps: tuple[Step, ...]
    answer: str | None = None
    writes: tuple[str, ...] = ()
    raw_writes: tuple[str, ...] | None = None
    settle: str | None = None
    check: str | None = None
    popup: bool = False
    raw: str | None = None
    na: str | None = None
    note: str = ""

    def expected_writes(self, driver: str) -> tuple[str, ...]:
        if driver != OURS and self.raw_writes is not None:
            return self.raw_writes
        return self.writes


# -- the task set --------------------------------------------------------------------------------------------------

HANDOVER = "ours hands this to the user (needs_user); the raw upstream does it"
SEAT_17 = "(r => ({{x: r.x + {}, y: r.y + {}}}))(document.querySelector('canvas').getBoundingClientRect())".format(
    *canvas.target_center(17)
)
"""Where the canvas task's free seat is, in viewport px (the lab's eyes for the screenshot a model is sent)."""

PARITY = (
    Task("dom_form", "parity", ("/dom_form/",), (
        Type("Full name", "Ada Lovelace", role="textbox"),
        Select("Country", "Japan"),
        Click("This is a gift", role="checkbox"),
        Click("Save and continue", role="button"),
    ), writes=("/dom_form/submit",)),
    Task("catalogue", "parity", ("/catalogue/",), (
        Click("Add to cart", role="button"),
    ), answer="Added to cart: Northwind Pro Trail Running Shoe", writes=("/catalogue/cart",),
        settle="document.getElementById('toast').textContent.includes('Added to cart')"),
    Task("login", "parity", ("/login/",), (
        Type("Email or username", "ada@example.com", role="textbox", handover=True),
        Type("Password", "correct horse", role="textbox", handover=True),
        Click("Sign in", role="button", handover=True),
    ), raw_writes=("/login/submit",), note=HANDOVER),
    Task("captcha", "parity", ("/captcha/",), (
        Click("not a robot", role="checkbox", handover=True),
    ), raw_writes=("/captcha/verify",), note=HANDOVER),
    Task("sensitive", "parity", ("/sensitive/",), (
        Click("Pay now", role="button", handover=True), Click("Delete account", role="button", handover=True),
    ), raw="each button opens a confirm dialog, and the scoped gateway that binds a raw upstream to its tab refuses "
        "to answer dialogs (they are the user's)", note="ours hands both to the user (needs_user)"),
    Task("injection", "parity", ("/injection/",), (
        Click("Add to wishlist", role="button"),
    ), answer="was added to your wishlist", writes=("/injection/wishlist",)),
    Task("frames", "parity", ("/frames/",), (
        Read("Chat with Northwind support", text=True),
        Click("Text me delivery updates", role="checkbox"),
        Type("Order number", "NW-48213", role="textbox"),
        Press("Enter"),
    ), answer="arrives tomorrow", writes=("/frames/lookup",)),
    Task("popup", "parity", ("/popup/",), (
        Click("Subscribe in a new window", role="button"),
    ), popup=True, note="the popup is a new Page, unauthorized for ours; its opening is the end state"),
    Task("canvas", "parity", ("/canvas/?seat=17",), (Look(), ClickAt(SEAT_17)), writes=("/canvas/pick",),
         answer=f"Seat {canvas.seat_label(17)} selected.",
         settle="!['No seat selected.', 'Checking seat…'].includes(document.getElementById('pick-status').textContent)",
         raw="a point click after a screenshot: neither upstream offers one with its default tools (@playwright/mcp "
         "needs --caps vision, chrome-devtools-mcp --experimentalVision)"),
    Task("stall", "parity", ("/stall/",), (), na="a navigation that never answers: its cost is a timeout, and the raw "
         "upstream would wait its own (60 s)"),
)  # fmt: skip

SHOP, FORM, ARTICLE = "/realistic/shop", "/realistic/form", "/realistic/article"
EVAL = (
    Task("eval-1-total", "eval", (SHOP,), (Read("of 168", text=True),), answer="168"),
    Task("eval-2-brand", "eval", (SHOP,), (Read("Tundra (86)"),), answer="Tundra (86)"),
    Task("eval-3-last", "eval", (SHOP,), (Read("Save Lagoon ember Fleece to wishlist"),),
         answer="Lagoon ember Fleece"),
    Task("eval-4-country", "eval", (FORM,), (Read("Germany"),), answer="Germany"),
    Task("eval-5-postcode", "eval", (FORM,), (Read("5 digits", text=True),), answer="5 digits"),
    Task("eval-6-minutes", "eval", (ARTICLE,), (Read("14 min read", text=True),), answer="14 min"),
    Task("eval-7-pages", "eval", ("/catalogue/",), (Read("Page 1 of 4"),), answer="Page 1 of 4"),
    Task("eval-8-lowest", "eval", ("/catalogue/?sort=price-asc",), (Read("€10.99", text=True),), answer="€10.99"),
    Task("eval-9-reviews", "eval", ("/catalogue/product?sku=NW-10070", "/catalogue/product?sku=NW-10140"), (
        Read("reviews", text=True), Open(1), Read("reviews", text=True),
    ), answer="NW-10140"),
    Task("eval-10-prices", "eval", (SHOP, "/catalogue/product?sku=NW-10700"), (
        Read("€254.99", text=True), Open(1), Read("€", text=True),
    ), answer="€254.99"),
)  # fmt: skip

REALISTIC = (
    Task("search", "realistic", ("/catalogue/",), (
        Type("Search", "dome tent", role="searchbox", submit=True),
        Read("100 results", text=True),
    ), answer="100 results"),
    Task("filter", "realistic", ("/catalogue/",), (
        Click("Camping gear", role="checkbox"),
        Select("Price", "€200 and above"),
        Click("Apply filters", role="button"),
        Read("results", text=True),
    ), answer="of 76 results"),
    Task("fill-form", "realistic", (FORM,), (
        Type("First name", "Ada", role="textbox"),
        Type("Last name", "Lovelace", role="textbox"),
        Type("Postcode", "10115", role="textbox"),
        Select("Country or region", "France"),
        Click("Newsletter", role="checkbox"),
        Click("Save changes", role="button"),
    ), check="f1.value === 'Ada' && f2.value === 'Lovelace' && f9.value === '10115' && country.value === 'France'"
             " && document.querySelector('[name=n2]').checked"),
    Task("compare-and-buy", "realistic", ("/catalogue/product?sku=NW-10070", "/catalogue/product?sku=NW-10140"), (
        Read("€", text=True), Open(1), Read("€", text=True), Click("Add to cart", role="button"),
    ), writes=("/catalogue/cart",)),
    Task("long-list", "realistic", ("/catalogue/",), (
        Read("Coastwise Ridge Daypack 22 L"),
        Click("Add to cart", role="button", after="Coastwise Ridge Daypack 22 L"),
    ), answer="Added to cart: Coastwise Ridge Daypack 22 L", writes=("/catalogue/cart",),
        settle="document.getElementById('toast').textContent.includes('Added to cart')"),
)  # fmt: skip

TASKS: dict[str, Task] = {task.name: task for task in (*PARITY, *EVAL, *REALISTIC)}
SMOKE = "eval-4-country"
"""The one task `make test` runs (`--benchmark-skip`): a short Page, a read, every driver."""


# -- finding "the element named X" in a driver's own snapshot text --------------------------------------------------

QUOTED = r'"(?P<name>(?:[^"\\]|\\.)*)"'
SYNTAX: dict[str, re.Pattern[str]] = {
    # ours: `qfz12 button "Add to cart"` (an act's changes prefix `~ ` or `+ `)
    OURS: re.compile(rf"^(?:[~+] )?(?P<ref>[a-z]+\d+) (?P<role>[\w-]+)(?: {QUOTED})?"),
    # @playwright/mcp's ARIA YAML: `- button "Add to cart" [ref=e12]`, quoted whole when it holds `: `
    PLAYWRIGHT: re.compile(rf"^\s*- '?(?P<role>[\w-]+)(?: {QUOTED})?.*?\[ref=(?P<ref>[a-z]*\d*e\d+)\]"),
    # chrome-devtools-mcp's text snapshot: `uid=1_12 button "Add to cart"`
    DEVTOOLS: re.compile(rf"^\s*uid=(?P<ref>\d+_\d+) (?P<role>[\w-]+)(?: {QUOTED})?"),
}


def resolve(text: str, driver: str, name: str, role: str | None = None, after: str | None = None) -> str | None:
    """The ref of the first element in `text` (a `driver` snapshot or our known element lines) whose name contains
    `name` and whose role is `role` (if given), after the first line holding `after` (if given); None if none."""
    syntax = SYNTAX[driver]
    lines = text.splitlines()
    if after is not None:
        start = next((i for i, line in enumerate(lines) if after in line), None)
        if start is None:
            return None
        lines = lines[start:]
    for line in lines:
        found = syntax.match(line)
        if found is None or found.group("name") is None:
            continue
        if name in found.group("name") and (role is None or found.group("role") == role):
            return found.group("ref")
    return None


# -- our observe arguments -------------------------------------------------------------------------------------------

STOP_WORDS = frozenset({"the", "a", "an", "of", "to", "and", "in", "on"})


def query_words(needle: str) -> str:
    """The words of a needle a scoped read matches on (every word must occur): its words without punctuation or
    stop words, so `"of 168"` asks for `168` and `"Save Lagoon ember Fleece to wishlist"` for the five names."""
    words = [w for w in re.findall(r"[\w€.]+", needle) if w.lower() not in STOP_WORDS]
    return " ".join(words)


def observe_arguments(
    schema: Mapping[str, Any], page: str, step: Read | None = None, *, scoped: bool = True
) -> dict[str, Any]:
    """The arguments of our first `observe` for a step: the Page, `full` detail when the needle is page text, and
    `query` (the needle's words) when the tool's input schema offers it (issue 31's scoped observation) and
    `scoped` is on. Continuations (`offset`) are the driver's."""
    arguments: dict[str, Any] = {"command": "observe", "page": page}
    if step is not None and step.text:
        arguments["detail"] = "full"
    if scoped and step is not None and "query" in schema.get("properties", {}):
        arguments["query"] = query_words(step.needle)
    return arguments


# -- the cost arithmetic -----------------------------------------------------------------------------------------------


def definition_tokens(tools: Iterable[Mapping[str, Any]]) -> int:
    """The tools as a client hands them to a model, every tool the server offers: name, description and input
    schema, as compact JSON (what `suites/budgets` measures for ours)."""
    shown = [{"name": t["name"], "description": t.get("description"), "input_schema": t["inputSchema"]} for t in tools]
    return count_text(json.dumps(shown, separators=(",", ":"), ensure_ascii=False))


@dataclass
class Tally:
    """What one driver's run of one task cost, and whether the task happened."""

    task: Task
    driver: str
    definition: int = 0
    answers: list[tuple[str, int, int]] = field(default_factory=list)
    """(tool, text tokens, image tokens) per call, in order."""
    failure: str | None = None
    """Why the task did not happen (the row then says FAILED); None when it did."""

    def add(self, tool: str, text: int, images: int = 0) -> None:
        self.answers.append((tool, text, images))

    def fail(self, why: str) -> None:
        if self.failure is None:
            self.failure = why

    def figures(self, backend: str | None = None) -> dict[str, object]:
        """The record `lab.costs` renders: tokens = the tool definitions once + every answer's text and images."""
        text = sum(t for _, t, _ in self.answers)
        images = sum(i for _, _, i in self.answers)
        return {
            "task": self.task.name,
            "group": self.task.group,
            "driver": self.driver,
            "backend": backend,
            "valid": self.failure is None,
            "failure": self.failure,
            "tokens": self.definition + text + images,
            "definition_tokens": self.definition,
            "answer_tokens": text,
            "image_tokens": images,
            "calls": len(self.answers),
            "tools": [tool for tool, _, _ in self.answers],
            "note": self.task.note,
        }


def not_applicable(task: Task, driver: str) -> str | None:
    """Why `driver` has no figure for `task` (None: it runs it)."""
    return task.na or (task.raw if driver != OURS else None)


def na_figures(task: Task, driver: str) -> dict[str, object]:
    """The record of a driver on a task it has no equivalent for: neither a cost nor a failure."""
    why = not_applicable(task, driver)
    return {"task": task.name, "group": task.group, "driver": driver, "valid": None, "failure": None, "na": why}


def seen(needle: str, texts: Sequence[str]) -> bool:
    """The needle occurs in one of the answers (whitespace collapsed: snapshots wrap and indent)."""
    flat = " ".join(needle.split())
    return any(flat in " ".join(text.split()) for text in texts)
