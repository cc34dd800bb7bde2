"""The one console driver: the app's console Page read and used the way a person would, through the lab's own CDP
connection (`lab_cdp`, a session of its own on the console's target), so the tap counts only what the app and its
runtime do to the console and never a command of the lab's.

Not the `playwright` package: it is not installed (it brings a node driver of its own), and `connect_over_cdp`
attaches to every Page of the browser, so the tap would see lab commands on the very Pages the isolation proofs
assert untouched. What is taken from Playwright is its actionability: before a click, tick, type or choice the driver
waits (bounded, inside the page, on animation frames) until the element is attached, visible, stable (the same box
on two frames in a row), enabled and the element hit at its centre (`elementFromPoint`), then acts once; a tick
then checks the box's state instead of clicking again.

Every wait is bounded and fails with an AssertionError naming what the console never showed, with what it did show.
"""

from __future__ import annotations

import base64
import contextlib
import json
from typing import Any

from lab.cdp import CDPClient

UI_TIMEOUT = 30.0
"""Seconds the console may take to show something (a Page listed, a card, a notice) or to let a control be used."""
TICK_TIMEOUT = 5.0
"""Seconds a box may take to show its click's tick: the page has handled the click by the time
`Input.dispatchMouseEvent` answers, so this bound only keeps a failure short."""
CDP_MARGIN = 5.0
"""The lab's bound on a CDP answer sits this far above the page's own bound, so the page's reason is the one told."""
LIVE = "document.body.dataset.connection === 'live'"
"""The console has its page and its event stream: what a person waits for before using it."""

TICKED = "[...document.querySelectorAll('#turn-pages input[data-page]:checked')].map((box) => box.dataset.page)"
"""The handles of the Pages ticked for the next turn."""

SNAPSHOT = """(() => {
  const text = (node, selector) => (node.querySelector(selector)?.textContent ?? "").trim();
  return {
    state: document.getElementById("turn")?.dataset.state,
    notice: text(document, "#notice"),
    backend: document.getElementById("backend")?.value,
    pages: [...document.querySelectorAll("#pages li.page")].map((li) => ({
      handle: li.dataset.page, relation: text(li, ".relation"), title: text(li, ".title"), url: text(li, ".url"),
      ticked: Boolean(document.querySelector(`#turn-pages input[data-page="${CSS.escape(li.dataset.page)}"]:checked`)),
    })),
    messages: [...document.querySelectorAll("#history article.message")].map((m) => ({
      id: m.dataset.id, role: m.dataset.role, text: text(m, ".body"),
      cards: [...m.querySelectorAll("article.card")].map((c) => ({
        call_id: c.dataset.callId, status: c.dataset.status, command: text(c, ".command"),
        backend: text(c, ".backend"), reason: text(c, ".reason"), page: text(c, ".page"),
        resolved: c.dataset.resolved === "true",
      })),
    })),
  };
})()"""
"""What a person sees of the console: the turn, the notice, the Pages, and every message with its cards."""

UNTIL = """new Promise((resolve, reject) => {
  const test = () => { try { return (%(condition)s); } catch (error) { return undefined; } };
  const first = test();
  if (first) return resolve(first);
  const stop = () => { observer.disconnect(); document.removeEventListener("scroll", look, true); };
  const look = () => { const value = test(); if (value) { stop(); clearTimeout(timer); resolve(value); } };
  const observer = new MutationObserver(look);
  observer.observe(document, {subtree: true, childList: true, attributes: true, characterData: true});
  document.addEventListener("scroll", look, true);
  const timer = setTimeout(() => { stop(); reject(new Error("timed out")); }, %(ms)d);
})"""
"""Resolves with the condition's value once it is truthy, rechecked on every DOM change and scroll (no polling)."""

ACTIONABLE = """new Promise((resolve, reject) => {
  const selector = %(selector)s;
  let last = null, why = "it is not in the console", frame = 0;
  const timer = setTimeout(() => { cancelAnimationFrame(frame); reject(new Error(why)); }, %(ms)d);
  const look = () => {
    const node = document.querySelector(selector);
    const box = node && node.getBoundingClientRect();
    if (!node) { why = "it is not in the console"; last = null; }
    else if (!box.width || !box.height || getComputedStyle(node).visibility === "hidden") {
      why = "it is not visible"; last = null;
    } else if (node.matches(":disabled")) { why = "it is disabled"; last = null; }
    else {
      node.scrollIntoViewIfNeeded(true);
      const now = node.getBoundingClientRect();
      const x = now.x + now.width / 2, y = now.y + now.height / 2;
      const hit = document.elementFromPoint(x, y);
      const still = last && now.x === last.x && now.y === last.y && now.width === last.width
        && now.height === last.height;
      const reached = hit && (node.contains(hit) || hit.control === node || hit.closest("label")?.control === node);
      if (still && reached) { clearTimeout(timer); return resolve([x, y]); }
      why = !still ? "it is still moving"
        : `a click at its centre reaches ${hit ? hit.tagName.toLowerCase() + (hit.id ? "#" + hit.id : "")
          + [...hit.classList].map((name) => "." + name).join("") : "nothing"}`;
      last = now;
    }
    frame = requestAnimationFrame(look);
  };
  look();
})"""
"""Resolves with the element's centre once it can take a click, as Playwright's actionability checks have it (the
console re-lays its Pages out when a title arrives, so a point read a frame early can lie beside its element)."""


def why(refused: AssertionError) -> str:
    """The page's own reason from a refused wait ("console: Error: it is disabled" → "it is disabled")."""
    return str(refused).removeprefix("console: ").removeprefix("Error: ")


class ConsoleDriver:
    """The console Page, seen and used through the lab's own CDP session on it (never through the tap).

    `context` is an isolated world of the lab's own (None: the console's main world, where its scripts run)."""

    def __init__(self, cdp: CDPClient, target_id: str, session: str, context: int | None = None) -> None:
        self.cdp = cdp
        self.target_id = target_id
        self.session = session
        self.context = context

    @classmethod
    async def attach(
        cls,
        cdp: CDPClient,
        url: str,
        *,
        target_id: str | None = None,
        world: str | None = None,
        ready: str = LIVE,
    ) -> ConsoleDriver:
        """Attach to the console at `url` (its target: `target_id`, or the one page target showing `url`) once its
        document is committed, in an isolated world named `world` if given, and return once `ready` holds."""
        if target_id is None:
            targets = (await cdp.send("Target.getTargets"))["targetInfos"]
            found = [t["targetId"] for t in targets if t["type"] == "page" and t["url"] == url]
            assert len(found) == 1, f"expected one window showing the console at {url}: {targets}"
            target_id = found[0]
        session = (await cdp.send("Target.attachToTarget", {"targetId": target_id, "flatten": True}))["sessionId"]

        def is_console(params: dict[str, Any]) -> bool:
            return "parentId" not in params["frame"] and params["frame"]["url"].startswith(url)

        committed = cdp.wait_for_event("Page.frameNavigated", session, predicate=is_console, timeout=UI_TIMEOUT)
        try:
            await cdp.send("Page.enable", session_id=session)
            frame = (await cdp.send("Page.getFrameTree", session_id=session))["frameTree"]["frame"]
            if not frame["url"].startswith(url):
                frame = (await committed)["frame"]
        finally:
            committed.cancel()
        context = None
        if world is not None:
            created = await cdp.send("Page.createIsolatedWorld", {"frameId": frame["id"], "worldName": world}, session)
            context = created["executionContextId"]
        driver = cls(cdp, target_id, session, context)
        await driver.until(ready, "itself ready")
        return driver

    async def detach(self) -> None:
        with contextlib.suppress(Exception):  # the console may be gone already (closed by the test or the app)
            await self.cdp.send("Target.detachFromTarget", {"sessionId": self.session})

    # -- the eyes --------------------------------------------------------------------------------------------------

    async def evaluate(self, expression: str, *, timeout: float = UI_TIMEOUT) -> Any:
        """The value of a JS expression in the console (a promise is awaited); a page exception fails the test."""
        params: dict[str, Any] = {"expression": expression, "awaitPromise": True, "returnByValue": True}
        if self.context is not None:
            params["contextId"] = self.context
        result = await self.cdp.send("Runtime.evaluate", params, session_id=self.session, timeout=timeout + CDP_MARGIN)
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            told = details.get("exception", {}).get("description") or details.get("text") or ""
            raise AssertionError(f"console: {told.splitlines()[0] if told else details}")  # the stack is the lab's
        return result["result"].get("value")

    async def until(self, condition: str, what: str | None = None, timeout: float = UI_TIMEOUT) -> Any:
        """Wait inside the page until the JS expression `condition` is truthy; its value. Register it (start the
        task) before the action whose effect it waits for when the effect may come and go. Past `timeout` it fails
        saying the console never showed `what` (the condition itself if not given), with what it did show."""
        try:
            return await self.evaluate(UNTIL % {"condition": condition, "ms": int(timeout * 1000)}, timeout=timeout)
        except AssertionError as exc:
            raise AssertionError(
                f"within {timeout:g}s the console never showed {what or condition} ({why(exc)}); it showed:\n"
                f"{await self.shown()}"
            ) from None

    async def text(self, selector: str) -> str:
        """The text of the first element matching `selector` ('' when there is none)."""
        return await self.evaluate(f"document.querySelector({json.dumps(selector)})?.textContent ?? ''")

    async def snapshot(self) -> dict[str, Any]:
        """What a person sees: the turn's state, the notice, the Pages, the messages and their cards."""
        return await self.evaluate(SNAPSHOT)

    async def shown(self) -> str:
        """The snapshot as a failure message shows it (its end, where the latest messages are)."""
        try:
            return json.dumps(await self.snapshot(), indent=1)[-6000:]
        except Exception as exc:  # a console that is gone or broken still lets the first failure be told
            return f"(nothing: {exc})"

    async def screenshot(self) -> bytes:
        """The console's window as the person sees it (PNG of the viewport)."""
        shot = await self.cdp.send("Page.captureScreenshot", {"format": "png"}, session_id=self.session)
        return base64.b64decode(shot["data"])

    # -- the hands -------------------------------------------------------------------------------------------------

    async def actionable(self, selector: str, timeout: float = UI_TIMEOUT) -> tuple[float, float]:
        """The centre of the element once it is attached, visible, stable, enabled and what a click there reaches."""
        script = ACTIONABLE % {"selector": json.dumps(selector), "ms": int(timeout * 1000)}
        try:
            x, y = await self.evaluate(script, timeout=timeout)
        except AssertionError as exc:
            raise AssertionError(
                f"within {timeout:g}s {selector} never became usable in the console ({why(exc)}); it showed:\n"
                f"{await self.shown()}"
            ) from None
        return x, y

    async def click(self, selector: str) -> None:
        """A real left click (pointer moved, pressed, released) at the element's centre, once it can take one."""
        x, y = await self.actionable(selector)
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            press = {"button": "left", "clickCount": 1} if kind != "mouseMoved" else {}
            await self.cdp.send("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, **press}, self.session)

    async def tick(self, selector: str, ticked: bool = True) -> None:
        """Tick (or untick) a checkbox with one click, then see that it took: a person looks at the box after."""
        await self.actionable(selector)
        box = f"document.querySelector({json.dumps(selector)})"
        if await self.evaluate(f"{box}.checked") == ticked:  # a tick stays across sends: it may be as wanted already
            return
        await self.click(selector)
        await self.until(
            f"{box}.checked === {json.dumps(ticked)}", f"{selector} {'' if ticked else 'un'}ticked", TICK_TIMEOUT
        )

    async def type(self, selector: str, text: str) -> None:
        """Click into the field, select what it holds, and type `text` over it as keyboard input would insert it."""
        await self.click(selector)
        field = f"document.querySelector({json.dumps(selector)})"
        await self.until(f"document.activeElement === {field}", f"{selector} focused by a click on it")
        await self.evaluate(f"{field}.select()")
        await self.cdp.send("Input.insertText", {"text": text}, session_id=self.session)

    async def choose(self, selector: str, value: str) -> None:
        """Pick an option of a `<select>` as the browser does when a person picks one (a headless window cannot show
        the drop-down to click in): focus, the value, then `input` and `change`."""
        await self.actionable(selector)
        picked = await self.evaluate(
            f"""(() => {{
                const select = document.querySelector({json.dumps(selector)});
                if (![...select.options].some((option) => option.value === {json.dumps(value)})) return false;
                select.focus();
                select.value = {json.dumps(value)};
                select.dispatchEvent(new Event("input", {{bubbles: true}}));
                select.dispatchEvent(new Event("change", {{bubbles: true}}));
                return true;
            }})()"""
        )
        assert picked, f"console: {selector} has no option {value!r}"

    # -- the moves several suites make -----------------------------------------------------------------------------

    async def ticked_pages(self) -> list[str]:
        """The handles of the Pages ticked for the next turn."""
        return await self.evaluate(TICKED)

    async def tick_page(self, handle: str, ticked: bool = True) -> None:
        """Tick (or untick) a Page for the next turn."""
        await self.tick(f'#turn-pages input[data-page="{handle}"]', ticked)

    async def send(self, text: str, pages: list[str]) -> None:
        """Tick exactly `pages` (a tick stays across sends: any other is unticked), type `text`, press Send; with no
        Page ticked, answer the console's warning with "Send without a Page" (it sends nothing until then)."""
        for handle in await self.ticked_pages():
            if handle not in pages:
                await self.tick_page(handle, ticked=False)
        for handle in pages:
            await self.tick_page(handle)
        await self.type("#message", text)
        await self.click("#send")
        if not pages:
            await self.click("#notice button.send-anyway")

    async def open_url(self, url: str, placement: str) -> str:
        """Open `url` through the console's form, `placement` of the chat; the new Page's handle once the console
        lists it and offers it to tick."""
        before = await self.evaluate("[...document.querySelectorAll('#pages li.page')].map((li) => li.dataset.page)")
        await self.choose("#open-placement", placement)
        await self.type("#open-url", url)
        await self.click("#open")
        return await self.until(
            f"[...document.querySelectorAll('#pages li.page')].map((li) => li.dataset.page)"
            f".find((handle) => !{json.dumps(before)}.includes(handle)"
            f' && document.querySelector(`#turn-pages input[data-page="${{handle}}"]`))',
            f"a new Page for {url} in its Pages list",
        )
