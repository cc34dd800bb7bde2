"""The real-apps corpus: one multi-step task per third-party app (`fixtures_sites/scenarios/realapps.py`), written
as parity tasks (`suites/parity/tasks.py`: a `Task` whose script drives a `Run`), so each run is recorded as steps
and its cost lands in the cost summary like any scenario's.

After every step the lab reads the app's true state with its own eyes (`Eyes.see`: `Workspace.evaluate` on the
lab's own CDP session, walking open shadow roots and same-origin frames where the app keeps its state) and
compares it with what the step should have left; the runtime's answer and the lab's reading are two separate
verdicts, and a step passes only when both hold. The lab never asks the runtime what the page holds.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from suites.parity.tasks import Run, Signature, Task

SEE_WAIT_MS = 6000
"""Bound on how long the lab waits, in the page, for the state a step should have left (an app renders after
the act's answer: React commits, a fetch returns, a component's update is a microtask later)."""

DEEP = """
const deep = (root, selector) => {
  const found = [...root.querySelectorAll(selector)];
  for (const el of root.querySelectorAll('*')) if (el.shadowRoot) found.push(...deep(el.shadowRoot, selector));
  return found;
};
"""
"""`deep(root, selector)`: every match in `root` and in every open shadow root under it (the lab's own walk)."""


@dataclass
class Reading:
    """The lab's reading after one step: what it expected, what it saw, and whether they agree."""

    label: str
    expected: dict[str, Any]
    seen: dict[str, Any]

    @property
    def holds(self) -> bool:
        return all(self.seen.get(key) == value for key, value in self.expected.items())


@dataclass
class Eyes:
    """The lab's own eyes on Page A: `reader` is a JS expression (it may use `deep`) giving the app's state as a
    JSON object; `see` waits (bounded, in the page) until the state holds what a step should have left.

    Each task reads the app's first state before the agent's first observe: the window's load event comes before an
    app that loads its components lazily (Shoelace's autoloader, Ionic, a React or Svelte mount) has rendered, and a
    task is about the app, not about the race with its boot."""

    run: Run
    reader: str
    readings: list[Reading] = field(default_factory=list)

    async def see(self, label: str, *, writes: int | None = None, **expected: Any) -> Reading:
        """Wait (bounded) until the app shows `expected`, then read it; `writes`: the ledger's count of real
        writes so far, which the lab's server read when they arrived."""
        script = f"""new Promise((resolve) => {{
            {DEEP}
            const read = () => {{ try {{ return ({self.reader}); }} catch (e) {{ return {{error: String(e)}}; }} }};
            const want = {json.dumps(expected)};
            const holds = (seen) => Object.keys(want).every((k) => JSON.stringify(seen[k]) === JSON.stringify(want[k]));
            const until = Date.now() + {SEE_WAIT_MS};
            const tick = () => {{
                const seen = read();
                if (holds(seen) || Date.now() > until) resolve(JSON.stringify(seen)); else setTimeout(tick, 50);
            }};
            tick();
        }})"""
        seen = json.loads(await self.run.desk.workspace.evaluate(self.run.desk.labs["A"], script, await_promise=True))
        if writes is not None:
            expected, seen = {**expected, "writes": writes}, {**seen, "writes": len(self.run.server.ledger.writes())}
        reading = Reading(label, expected, seen)
        self.readings.append(reading)
        self.run.signature.facts.setdefault("lab", []).append(
            {"label": label, "holds": reading.holds, "expected": expected, "seen": seen}
        )
        return reading


def step_table(signature: Signature) -> list[dict[str, Any]]:
    """Per step: the runtime's outcome, the lab's reading, and the verdict (both hold)."""
    readings = {row["label"]: row for row in signature.facts.get("lab", [])}
    rows = []
    for step in signature.steps:
        answered = step.status == "ok" and step.verified is not False
        reading = readings.get(step.label)
        rows.append(
            {
                "step": step.label,
                "command": step.command,
                "status": step.status,
                "reason_code": step.reason_code,
                "verified": step.verified,
                "lab": None if reading is None else reading["holds"],
                "pass": answered and reading is not None and reading["holds"],
                "seen": None if reading is None else reading["seen"],
            }
        )
    return rows


# -- the tasks ---------------------------------------------------------------------------------------------------

SWAGGER = """{
  filter: document.querySelector('.operation-filter-input')?.value ?? null,
  tags: [...document.querySelectorAll('.opblock-tag-section .opblock-tag')].map((t) => t.dataset.tag),
  open: [...document.querySelectorAll('.opblock.is-open .opblock-summary-path')].map((p) => p.textContent.trim()),
  trying: Boolean(document.querySelector('.opblock.is-open .try-out__btn.cancel')),
  tryable: Boolean(document.querySelector('.opblock.is-open .try-out__btn:not(.cancel)')),
  body: document.querySelector('.opblock.is-open textarea.body-param__text')?.value ?? null,
  placed: Boolean(document.querySelector('.opblock.is-open .responses-wrapper')?.textContent.includes('PO-1001')),
  copied: window.labCopied ?? null,
}"""
LISTEN_COPY = "document.addEventListener('copy', () => { window.labCopied = String(document.getSelection()); }, true)"
"""The lab's ear on the clipboard: what a copy put there, read from the copy event (the page keeps no trace), in the
capture phase (Swagger UI's copy-to-clipboard stops the event's propagation at the element it selects)."""
ORDER = '{"sku": "NW-1090", "quantity": 12, "site": "Lyon"}'


async def swagger(run: Run) -> None:
    """Swagger UI (React): filter the operations by tag, expand one, Try it out, edit its body, Execute (a write
    the app sends to the local API), verify the response it shows, then hover the operation's row (a scroll by ref)
    and click the copy button the hover reveals."""
    eyes = Eyes(run, SWAGGER)
    await eyes.see("observe the API", writes=0, tags=["catalogue", "stock", "orders", "suppliers", "sites"], open=[])
    seen = await run.observe("observe the API", page="left")
    seen = await run.act(
        seen,
        "filter by the orders tag",
        ("action:type",),
        type="type",
        ref=run.ref(seen, "textbox", "Filter by tag"),
        text="orders",
    )
    await eyes.see("filter by the orders tag", filter="orders", tags=["orders"])
    # The act's answer can be read before Swagger UI re-renders the filtered list (its changes then say every
    # operation is unchanged); the list the agent acts on next is the one a new observation shows.
    seen = await run.observe("observe the filtered list", page="left")
    await eyes.see("observe the filtered list", tags=["orders"], open=[])
    seen = await run.act(
        seen,
        "expand Create a restock request",
        ("action:click",),
        type="click",
        ref=run.ref(seen, "button", '"POST /realapps', 'Create a restock request"'),
    )
    # Swagger UI marks the operation open at once but draws its body (with "Try it out") only once it has resolved
    # the operation's part of the spec, later: the lab waits for the button the agent acts on next, as for the list.
    await eyes.see("expand Create a restock request", open=["/realapps/api/orders"], trying=False, tryable=True)
    seen = await run.observe("observe the operation", page="left")
    await eyes.see("observe the operation", open=["/realapps/api/orders"], trying=False, tryable=True)
    seen = await run.act(
        seen, "Try it out", ("action:click",), type="click", ref=run.ref(seen, "button", '"Try it out"')
    )
    await eyes.see("Try it out", trying=True)
    seen = await run.act(
        seen, "type the order", ("action:type",), type="type", ref=run.ref(seen, "textbox", "NW-1000"), text=ORDER
    )
    await eyes.see("type the order", body=ORDER)
    seen = await run.act(seen, "Execute", ("action:click",), type="click", ref=run.ref(seen, "button", '"Execute"'))
    await eyes.see("Execute", writes=1, placed=True)
    await run.verify(seen, "the response shows the order", ("verify:text",), type="text_present", text="PO-1001")
    await eyes.see("the response shows the order", placed=True)
    # Swagger UI reveals "Copy path to clipboard" by hover: 0 px wide until its operation's summary is hovered. A
    # scroll by ref rests the pointer on the summary; the act's answer then lists the button it revealed.
    seen = await run.observe("observe the paths", page="left")
    await eyes.see("observe the paths", copied=None)
    await run.desk.workspace.evaluate(run.desk.labs["A"], LISTEN_COPY)
    seen = await run.act(
        seen,
        "hover the operation's summary",
        ("action:scroll",),
        type="scroll",
        direction="down",
        ref=run.ref(seen, "button", '"POST /realapps', 'Create a restock request"'),
    )
    await eyes.see("hover the operation's summary", writes=1, copied=None)
    # Every operation has a copy button of that name (a backend reading the accessibility tree lists the 0 px ones
    # too): the agent clicks the one of the row it hovered, the first after that row's summary.
    known = seen.known or seen.observation
    summary = run.ref(seen, "button", '"POST /realapps', 'Create a restock request"')
    row = known[known.index(f"{summary} button") :]
    seen = await run.act(
        seen,
        "copy a path (a control hover reveals)",
        ("action:click",),
        type="click",
        ref=run.ref(row, "button", '"Copy path to clipboard"'),
    )
    await eyes.see("copy a path (a control hover reveals)", writes=1, copied="/realapps/api/orders")


DATATABLES = """(() => {
  const table = $('#example').DataTable(), info = table.page.info();
  return {length: info.length, page: info.page, pages: info.pages, shown: info.recordsDisplay,
          search: table.search(), order: table.order().map((o) => [o[0], o[1]])};
})()"""


async def datatables(run: Run) -> None:
    """DataTables (jQuery): a 144-row inventory, paged; search it, sort it, page through it, change the page
    length, and verify the table's own summary line."""
    eyes = Eyes(run, DATATABLES)
    await eyes.see("observe the table", writes=0, length=10, pages=15, shown=144, search="")
    seen = await run.observe("observe the table", page="left")
    seen = await run.act(
        seen,
        "search Osaka",
        ("action:type",),
        type="type",
        ref=run.ref(seen, "searchbox", "Search"),
        text="Osaka",
        submit=True,
    )
    await eyes.see("search Osaka", search="Osaka", shown=24, pages=3, page=0)
    seen = await run.act(
        seen, "sort by stock", ("action:click",), type="click", ref=run.ref(seen, "button", '"Stock: Activate to sort"')
    )
    await eyes.see("sort by stock", order=[[3, "asc"]], page=0)
    seen = await run.act(seen, "next page", ("action:click",), type="click", ref=run.ref(seen, "link", '"Next"'))
    await eyes.see("next page", page=1, shown=24)
    await run.verify(
        seen, "the summary says page two", ("verify:text",), type="text_present", text="Showing 11 to 20 of 24 entries"
    )
    await eyes.see("the summary says page two", page=1)
    seen = await run.act(
        seen,
        "show 25 per page",
        ("action:select",),
        type="select",
        ref=run.ref(seen, "combobox", "entries per page"),
        values=["25"],
    )
    await eyes.see("show 25 per page", length=25, pages=1, page=0, shown=24)
    await run.verify(
        seen, "the summary says one page", ("verify:text",), type="text_present", text="Showing 1 to 24 of 24 entries"
    )
    await eyes.see("the summary says one page", writes=0, length=25, search="Osaka")


JSONEDITOR = """(() => ({
  json: window.editor.get(),
  expanded: document.querySelectorAll('.jsoneditor-tree button.jsoneditor-expanded').length,
  results: document.querySelector('.jsoneditor-results')?.textContent ?? '',
}))()"""


async def jsoneditor(run: Run) -> None:
    """JSONEditor (plain ES): collapse and expand the tree, untick a boolean, search the document, verify."""
    eyes = Eyes(run, JSONEDITOR)
    document = {"warehouse": "Northwind Osaka", "manager": "Aiko Tanaka", "open": True,
                "bins": {"A1": "Hex nut", "A2": "Wing nut", "B1": "Rivet"},
                "staff": ["Aiko Tanaka", "Ren Sato", "Mei Kobayashi"]}  # fmt: skip
    await eyes.see("observe the document", json=document)
    seen = await run.observe("observe the document", page="left")
    seen = await run.act(
        seen, "collapse all", ("action:click",), type="click", ref=run.ref(seen, "button", '"Collapse all fields"')
    )
    await eyes.see("collapse all", expanded=0)
    seen = await run.act(
        seen, "expand all", ("action:click",), type="click", ref=run.ref(seen, "button", '"Expand all fields"')
    )
    await eyes.see("expand all", expanded=3)
    seen = await run.act(seen, "untick open", ("action:click",), type="click", ref=run.ref(seen, "checkbox"))
    await eyes.see("untick open", json={**document, "open": False})
    seen = await run.act(
        seen,
        "search Rivet",
        ("action:type",),
        type="type",
        ref=run.ref(seen, "textbox"),
        text="Rivet",
    )
    await eyes.see("search Rivet", results="1\u00a0result")
    await run.verify(seen, "the bin is found", ("verify:text",), type="text_present", text="Rivet")
    await eyes.see("the bin is found", json={**document, "open": False})


SVELTE_JSONEDITOR = """(() => ({
  json: window.editor.get().json ?? JSON.parse(window.editor.get().text),
  text: Boolean(document.querySelector('.jse-text-mode')),
}))()"""


async def svelte_jsoneditor(run: Run) -> None:
    """svelte-jsoneditor (Svelte): toggle a boolean, switch to the text mode, verify the text there."""
    eyes = Eyes(run, SVELTE_JSONEDITOR)
    await eyes.see("observe the document", text=False)
    seen = await run.observe("observe the document", page="left")
    seen = await run.act(
        seen,
        "toggle open",
        ("action:click",),
        type="click",
        ref=run.ref(seen, "checkbox", "Click to toggle this boolean value"),
    )
    await eyes.see("toggle open", json={"warehouse": "Northwind Osaka", "manager": "Aiko Tanaka", "open": False,
                   "bins": {"A1": "Hex nut", "A2": "Wing nut", "B1": "Rivet"},
                   "staff": ["Aiko Tanaka", "Ren Sato", "Mei Kobayashi"]})  # fmt: skip
    seen = await run.act(seen, "text mode", ("action:click",), type="click", ref=run.ref(seen, "button", '"text"'))
    await eyes.see("text mode", text=True)
    await run.verify(seen, "the text shows the staff", ("verify:text",), type="text_present", text="Mei Kobayashi")
    await eyes.see("the text shows the staff", text=True)
    seen = await run.act(seen, "tree mode", ("action:click",), type="click", ref=run.ref(seen, "button", '"tree"'))
    await eyes.see("tree mode", text=False)


TINYMCE = """(() => {
  const editor = tinymce.activeEditor;
  const frame = document.querySelector('iframe.tox-edit-area__iframe');
  return {content: editor.getContent(), frameText: frame?.contentDocument.body.textContent ?? null};
})()"""


async def tinymce(run: Run) -> None:
    """TinyMCE (its editing area is an iframe): align the paragraph right, then justify it, undo, verify the
    text inside the iframe."""
    eyes = Eyes(run, TINYMCE)
    await eyes.see("observe the editor", content="<p>Hello, World!</p>", frameText="Hello, World!")
    seen = await run.observe("observe the editor", page="left")
    seen = await run.act(
        seen, "align right", ("action:click",), type="click", ref=run.ref(seen, "button", '"Align right"')
    )
    await eyes.see("align right", content='<p style="text-align: right;">Hello, World!</p>')
    seen = await run.act(seen, "justify", ("action:click",), type="click", ref=run.ref(seen, "button", '"Justify"'))
    await eyes.see("justify", content='<p style="text-align: justify;">Hello, World!</p>')
    seen = await run.act(seen, "undo", ("action:click",), type="click", ref=run.ref(seen, "button", '"Undo"'))
    await eyes.see("undo", content='<p style="text-align: right;">Hello, World!</p>')
    await run.verify(
        seen,
        "the iframe's text is there",
        ("verify:text", "frames:observe-verify"),
        type="text_present",
        text="Hello, World!",
    )
    await eyes.see("the iframe's text is there", frameText="Hello, World!")


SHOELACE = """(() => ({
  name: document.querySelector('sl-input[name=name]').value,
  animal: document.querySelector('sl-select').value,
  listbox: document.querySelector('sl-select').open,
  comment: document.querySelector('sl-textarea').value,
  details: document.querySelector('sl-details').open,
  inputs: deep(document, 'input').length,
}))()"""


async def shoelace(run: Run) -> None:
    """Shoelace (Lit web components, every control inside a shadow root): type a name, pick from a custom
    select, type a comment, open a details panel, verify the fields."""
    eyes = Eyes(run, SHOELACE)
    await eyes.see("observe the form", name="", animal="", details=False)
    seen = await run.observe("observe the form", page="left")
    seen = await run.act(
        seen, "type the name", ("action:type",), type="type", ref=run.ref(seen, "textbox", '"Name'), text="Ada Lovelace"
    )
    await eyes.see("type the name", name="Ada Lovelace")
    seen = await run.act(
        seen, "open the animals", ("action:click",), type="click", ref=run.ref(seen, "combobox", "Favorite Animal")
    )
    await eyes.see("open the animals", listbox=True)
    seen = await run.act(seen, "pick Dogs", ("action:click",), type="click", ref=run.ref(seen, "option", '"Dogs"'))
    await eyes.see("pick Dogs", animal="dogs", listbox=False)
    seen = await run.act(
        seen,
        "type the comment",
        ("action:type",),
        type="type",
        ref=run.ref(seen, "textbox", '"Comment'),
        text="Two crates, please.",
    )
    await eyes.see("type the comment", comment="Two crates, please.")
    seen = await run.act(seen, "open the details", ("action:click",), type="click", ref=run.ref(seen, '"Toggle Me"'))
    await eyes.see("open the details", details=True)
    await run.verify(
        seen,
        "the name holds",
        ("verify:element-state",),
        type="element_state",
        role="textbox",
        name="Name *",
        state="value",
        expected="Ada Lovelace",
    )
    await eyes.see("the name holds", name="Ada Lovelace", animal="dogs")


RAPIDOC = """(() => {
  const root = document.querySelector('rapi-doc').shadowRoot;
  const requests = deep(root, 'api-request');
  return {
    operations: requests.length,
    schemaTabs: deep(root, 'button[data-tab=schema].active').length,
    response: [...(requests[0]?.shadowRoot?.querySelectorAll('code') ?? [])]
      .some((c) => c.textContent.includes('Hex nut')),
  };
})()"""


async def rapidoc(run: Run) -> None:
    """RapiDoc (a Lit web component: the whole UI in its shadow root, each operation's request and response in
    shadow roots of their own; the long read mode): switch a response to its schema, try the first operation
    against the local API, verify its response."""
    eyes = Eyes(run, RAPIDOC)
    await eyes.see("observe the API", writes=0, operations=18, schemaTabs=0, response=False)
    seen = await run.observe("observe the API", page="left")
    seen = await run.act(
        seen, "show a schema", ("action:click",), type="click", ref=run.ref(seen, "button", '"SCHEMA"')
    )
    await eyes.see("show a schema", schemaTabs=1)
    seen = await run.act(
        seen, "try List products", ("action:click",), type="click", ref=run.ref(seen, "button", '"TRY"')
    )
    await eyes.see("try List products", response=True)
    await run.verify(seen, "the response is shown", ("verify:text",), type="text_present", text="Hex nut")
    await eyes.see("the response is shown", writes=0, response=True)


IONIC = """(() => ({
  name: document.querySelector('ion-input').value ?? '',
  toggle: document.querySelector('ion-toggle').checked,
  agreed: document.querySelector('ion-checkbox').checked,
  accordion: document.querySelector('ion-accordion-group').value ?? null,
}))()"""


async def ionic(run: Run) -> None:
    """Ionic (Stencil web components: the toggle, checkbox, range and accordion parts in shadow roots): type a
    name, switch a toggle, tick a checkbox, open an accordion, verify."""
    eyes = Eyes(run, IONIC)
    await eyes.see("observe the settings", name="", toggle=False, agreed=False, accordion=None)
    seen = await run.observe("observe the settings", page="left")
    seen = await run.act(
        seen,
        "type the name",
        ("action:type",),
        type="type",
        ref=run.ref(seen, "textbox", '"Display name"'),
        text="Ada Lovelace",
    )
    await eyes.see("type the name", name="Ada Lovelace")
    seen = await run.act(
        seen,
        "switch notifications on",
        ("action:click",),
        type="click",
        ref=run.ref(seen, "switch", "Receive Push Notifications"),
    )
    await eyes.see("switch notifications on", toggle=True)
    seen = await run.act(seen, "agree", ("action:click",), type="click", ref=run.ref(seen, "checkbox", "I agree"))
    await eyes.see("agree", agreed=True)
    seen = await run.act(
        seen,
        "open the first accordion",
        ("action:click",),
        type="click",
        ref=run.ref(seen, "button", '"First Accordion"'),
    )
    await eyes.see("open the first accordion", accordion="first")
    await run.verify(
        seen,
        "the terms are ticked",
        ("verify:element-state",),
        type="element_state",
        role="checkbox",
        name="I agree to the terms and conditions",
        state="checked",
        expected=True,
    )
    await eyes.see("the terms are ticked", agreed=True, toggle=True, name="Ada Lovelace")


REQS = ("action:type", "action:click", "action:select", "verify:text", "verify:element-state", "frames:observe-verify")

TASKS: dict[str, Task] = {
    task.name.removeprefix("realapps-"): task
    for task in (
        Task("realapps-swagger", "/realapps/swagger/", (*REQS, "action:scroll"), swagger),
        Task("realapps-datatables", "/realapps/datatables/", REQS, datatables),
        Task("realapps-jsoneditor", "/realapps/jsoneditor/", REQS, jsoneditor),
        Task("realapps-svelte-jsoneditor", "/realapps/svelte-jsoneditor/", REQS, svelte_jsoneditor),
        Task("realapps-tinymce", "/realapps/tinymce/", REQS, tinymce),
        Task("realapps-shoelace", "/realapps/shoelace/", REQS, shoelace),
        Task("realapps-rapidoc", "/realapps/rapidoc/", REQS, rapidoc),
        Task("realapps-ionic", "/realapps/ionic/", REQS, ionic),
    )
}
