"""The parity ledger: every requirement the suites prove, where it comes from, and where a backend diverges.

Each test names the requirements it exercises with `@pytest.mark.req("id", ...)`; `suites/parity/test_ledger.py`
holds both directions against this data: every test names known requirements, and every requirement is exercised
on every backend in `suites.harness.BACKENDS` unless a divergence is declared for it here, with its reason.
A divergence is an outcome difference the agent would notice (a refusal where another backend acts); a difference
only in how or how fast (same outcome) is a `note`, shown in the table but excusing nothing.

A new backend joins by adding its name to `BACKENDS`: the ledger check then lists every requirement it has not yet
exercised, and each is either covered by a test or declared here as a divergence with a reason.

`python -m suites.parity.ledger` prints `docs/parity.md`; `--write` rewrites it (`make parity-doc`).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from runtime.reasons import ReasonCode
from suites.harness import BACKENDS

DOC = Path(__file__).resolve().parents[2] / "docs" / "parity.md"
SOURCES = DOC.with_name("requirements.md")
"""Where the requirements come from: each requirement's `source` is the anchor of one `###` section there."""


PW = "playwright_mcp"
CDM = "chrome_devtools_mcp"
OCC = "open_claude_chrome"


@dataclass(frozen=True)
class Requirement:
    id: str
    source: str
    """The anchor of the section of docs/requirements.md that asks for it (the originals are outside the repo)."""
    text: str
    divergences: dict[str, str] = field(default_factory=dict)
    """backend → why this backend does not meet the requirement (the outcome the agent gets instead)."""
    notes: dict[str, str] = field(default_factory=dict)
    """backend → a difference in how, with the same outcome (excuses nothing)."""


def _reasons() -> Iterable[Requirement]:
    texts = {
        ReasonCode.invalid_arguments: "malformed arguments, an empty assertion or an unknown ref answer with it; so "
        "does an action the backend cannot express, with its advice as the hint",
        ReasonCode.invalid_capability: "a missing, forged, replayed or cross-connection token, or an unauthorized "
        "Page, answers with it before any backend call",
        ReasonCode.ambiguous_page: "a relation word naming no or several authorized Pages answers with it",
        ReasonCode.page_context_stale: "a token of an older model request, or a session whose Page changed revision",
        ReasonCode.stale_observation: "an act on anything but the latest frame, or on a frame a write spent",
        ReasonCode.page_access_disabled: "a session whose Page the user disabled",
        ReasonCode.target_lost: "a session whose Page was closed, crashed or replaced",
        ReasonCode.needs_user: "sign-in, CAPTCHA and sensitive submits are the user's",
        ReasonCode.timeout: "an act past act_timeout, or a write lease not granted in time; never success",
        ReasonCode.cancelled: "a cancelled act never answers success: over MCP the cancelled call gets no answer, "
        "and the frame it carried is spent (the code is reserved for answers a cancelled call can still carry)",
        ReasonCode.verification_failed: "an assertion that does not hold on the live Page",
    }
    for code in ReasonCode:
        yield Requirement(f"reason:{code.value}", "unified-failure-semantics", texts[code])


_req = Requirement


REQUIREMENTS: tuple[Requirement, ...] = (
    # -- release proofs ------------------------------------------------------------------------------------------
    _req(
        "protocol:one-tool", "release-proof-tool-surface", "tools/list shows one tool, computer_use; no upstream tool"
    ),
    _req("isolation:b-untouched", "release-proof-page-isolation", "with A authorized, 0 CDP calls reach Page B"),
    _req(
        "isolation:chat-untouched", "release-proof-page-isolation", "with A authorized, 0 CDP calls reach the chat Page"
    ),
    _req(
        "isolation:other-window-untouched",
        "release-proof-page-isolation",
        "with A authorized, 0 CDP calls reach a Page in another window",
    ),
    _req(
        "isolation:every-scenario",
        "release-proof-page-isolation",
        "observing and verifying A on every scenario reads nothing else",
    ),
    _req(
        "isolation:unauthorized-page",
        "release-proof-page-isolation",
        "naming an unauthorized Page is refused without touching it",
    ),
    _req(
        "freeze:running-session-keeps-backend",
        "release-proof-backend-frozen-per-session",
        "changing the backend setting leaves a running ComputerSession on its backend and its CDP connections",
    ),
    _req(
        "freeze:next-session-uses-new-backend",
        "release-proof-backend-frozen-per-session",
        "the next ComputerSession uses the backend the setting names now, on new connections",
    ),
    _req(
        "freeze:failure-never-switches",
        "release-proof-one-write-per-action",
        "a failed or timed-out act never starts another backend (no new connection, no child of another kind)",
    ),
    _req(
        "writes:at-most-one",
        "release-proof-one-write-per-action",
        "one Action makes at most one real write (fixture ledger)",
    ),
    _req(
        "awareness:swap-left-right",
        "release-proof-page-awareness",
        "swapping panes updates relation and preview in the next request",
    ),
    _req("awareness:split-top-bottom", "page-registry", "a split puts one Page above the chat and one below"),
    _req("awareness:other-window", "page-registry", "a Page in another workspace window is other_window"),
    _req("awareness:ambiguous", "page-registry", "a relation word naming two Pages is ambiguous_page"),
    _req(
        "foreground:occluded",
        "release-proof-non-foreground-execution",
        "a covered Page (another window spans it; headless keeps it visible) is operated, 0 focus calls",
    ),
    _req(
        "foreground:minimized",
        "release-proof-non-foreground-execution",
        "a minimized Page is operated, 0 focus calls",
        divergences={
            PW: "Playwright's actionability checks wait for an animation frame, which headless Chromium never "
            "runs in a minimized window; only focus emulation (absorbed by the gateway) would restart them",
            CDM: "Puppeteer's locator (stable bounding box, in viewport) waits for an animation frame, which "
            "headless Chromium never runs in a minimized window; only focus emulation would restart them",
        },
    ),
    _req(
        "foreground:unfocused", "release-proof-non-foreground-execution", "an unfocused Page is operated, 0 focus calls"
    ),
    _req(
        "foreground:no-focus-calls",
        "release-proof-non-foreground-execution",
        "no focus or foreground call reaches any Page",
    ),
    _req("visual:dom-zero-screenshots", "release-proof-visual-limits", "an ordinary DOM flow takes 0 screenshots"),
    _req(
        "visual:canvas-one-screenshot", "release-proof-visual-limits", "a canvas observation takes at most 1 screenshot"
    ),
    _req(
        "visual:semantic-fallback",
        "three-backends",
        "an observation whose viewport shows a drawn surface (a canvas or an image map, 160x120 px or more, as the "
        "runtime's probe sees it) carries one viewport screenshot without detail=visual; an act's re-observation "
        "and a DOM Page none",
        divergences={
            PW: "the spec gives the fallback to open_claude_chrome: the observation is text only, and a canvas "
            "takes its screenshot when asked (detail=visual)",
            CDM: "the spec gives the fallback to open_claude_chrome: the observation is text only, and a canvas "
            "takes its screenshot when asked (detail=visual)",
        },
    ),
    _req(
        "visual:point-next-request-only",
        "cost-and-boundaries",
        "a screenshot's point is good for the next model request only",
    ),
    _req("honesty:empty-assertion", "release-proof-failure-honesty", "an empty or unknown assertion is never verified"),
    _req("honesty:stale-frame", "release-proof-failure-honesty", "an act on a stale frame writes nothing"),
    _req("honesty:timeout", "release-proof-failure-honesty", "an act that does not finish in time is timeout"),
    _req(
        "honesty:cancel-during-act",
        "release-proof-failure-honesty",
        "a cancel during act gives no success and at most one write",
    ),
    _req("honesty:target-lost", "release-proof-failure-honesty", "a crashed or closed Page is target_lost"),
    _req("honesty:verification-failed", "verify", "an assertion that does not hold is verification_failed"),
    _req(
        "parity:shadow-dom",
        "verify",
        "every command answers alike on a page built in open shadow roots and on the same page in the light DOM "
        "(observe's text, verify's text, element state and count checks, the preview), as the lab reads the app",
    ),
    *(
        _req(
            f"parity:{name}",
            "release-proof-cross-backend-parity",
            f"the {name} task gives its declared outcome signature on every backend (and the same across them)",
        )
        for name in (
            "dom_form",
            "catalogue",
            "login",
            "captcha",
            "sensitive",
            "injection",
            "popup",
            "frames",
            "canvas",
            "stall",
        )
    ),
    _req(
        "parity:shadow-acts",
        "release-proof-cross-backend-parity",
        "acts by ref (click, select, type into a text and a date field, scroll to, then Enter) inside nested open "
        "shadow roots answer ok on the first try and leave the page as on the same app built in the light DOM",
    ),
    _req(
        "parity:ledger",
        "release-proof-cross-backend-parity",
        "every test names requirements of this ledger, and every requirement is exercised on every backend or "
        "declares why not",
    ),
    # -- proofs that cannot pass by accident (issue 12) ----------------------------------------------------------
    _req(
        "isolation:canary-child-bytes",
        "proofs-that-cannot-pass-by-accident",
        "the canaries of B, the chat Page and D appear in 0 bytes between a backend child and its gateway",
    ),
    _req(
        "isolation:canary-result-bytes",
        "proofs-that-cannot-pass-by-accident",
        "the canaries of unauthorized Pages appear in 0 bytes of any result",
    ),
    _req(
        "isolation:no-unknown-session",
        "proofs-that-cannot-pass-by-accident",
        "0 tap records are attributed to a session the tap does not know",
    ),
    _req(
        "isolation:discovery-confined",
        "proofs-that-cannot-pass-by-accident",
        "discovery reads and events naming other Pages reach only the runtime's registry, never a backend child",
    ),
    _req(
        "capability:real-transports",
        "proofs-that-cannot-pass-by-accident",
        "the isolation and token proofs hold over stdio and streamable HTTP as well as in-process",
    ),
    _req(
        "capability:call-id-mismatch",
        "proofs-that-cannot-pass-by-accident",
        "a token presented with another tool_call_id is invalid_capability",
    ),
    _req(
        "capability:foreign-first",
        "proofs-that-cannot-pass-by-accident",
        "a token presented first on a foreign connection is refused there and void for its own connection",
    ),
    _req(
        "capability:stateless-refused",
        "proofs-that-cannot-pass-by-accident",
        "a stateless-HTTP client gets invalid_capability saying there is no connection to bind the token to",
    ),
    _req(
        "capability:connection-unidentified",
        "proofs-that-cannot-pass-by-accident",
        "a call whose MCP connection cannot be identified is refused (fail closed), before any backend call",
    ),
    _req(
        "parity:absolute-expectations",
        "proofs-that-cannot-pass-by-accident",
        "each parity task is checked against its declared outcome signature on every backend, not only across them",
    ),
    _req(
        "awareness:focus-keeps-binding",
        "proofs-that-cannot-pass-by-accident",
        "focusing another Page keeps the session bound: the next act lands on the same target",
    ),
    _req(
        "awareness:pane-move-keeps-binding",
        "proofs-that-cannot-pass-by-accident",
        "moving or resizing the Page's pane keeps the session bound: the next act lands on the same target",
    ),
    _req(
        "awareness:hide-invalidates",
        "proofs-that-cannot-pass-by-accident",
        "hiding the Page ends its session before the next side effect",
    ),
    _req(
        "awareness:transfer-invalidates",
        "proofs-that-cannot-pass-by-accident",
        "moving the Page to another window ends its session before the next side effect",
    ),
    _req(
        "foreground:preconditions-checked",
        "proofs-that-cannot-pass-by-accident",
        "the Page's visibility and focus, read through the lab's own connection, are what the test's name claims",
    ),
    _req(
        "writes:page-attributed",
        "proofs-that-cannot-pass-by-accident",
        "every ledger row carries the nonce of the Page whose form wrote it",
    ),
    _req(
        "protocol:tool-table-params",
        "proofs-that-cannot-pass-by-accident",
        "docs/mcp.md lists each parameter's type and description and each command as the live server has them",
    ),
    _req(
        "protocol:reason-codes-emitted",
        "proofs-that-cannot-pass-by-accident",
        "every documented reason code is one the runtime emits, or is marked as not yet emitted",
    ),
    _req(
        "visual:runtime-screenshot-count",
        "proofs-that-cannot-pass-by-accident",
        "the runtime counts screenshots per ComputerSession, and its count equals the tap's",
    ),
    # -- capability and protocol ---------------------------------------------------------------------------------
    _req(
        "capability:missing", "capability-token", "a call without a token is invalid_capability before any backend call"
    ),
    _req("capability:forged", "capability-token", "a forged token is invalid_capability before any backend call"),
    _req("capability:replayed", "capability-token", "a replayed token is invalid_capability before any backend call"),
    _req(
        "capability:cross-connection",
        "capability-token",
        "a token minted for another MCP connection is invalid_capability",
    ),
    _req("capability:stale", "capability-token", "a token of an older model request is page_context_stale"),
    _req("capability:expired", "the-boundary", "a token past its lifetime is invalid_capability, no backend call"),
    _req("capability:bounded", "the-boundary", "10,000 calls leave the context store and verifier bounded"),
    _req("capability:independent-hosts", "the-boundary", "two hosts' turns never stale each other"),
    _req("transport:remote-opt-in", "the-boundary", "HTTP off loopback needs --allow-remote and a bearer token"),
    _req("transport:bearer", "the-boundary", "with a bearer token, a request without it gets 401 before MCP"),
    _req(
        "transport:bounded-servers",
        "the-boundary",
        "1,200 slow request heads on every listener at once leave /mcp, /v1, the console, pairing and a gateway "
        "answering a legitimate client; an MCP session flood stops at 64 and a new client gets in once they idle out",
    ),
    # -- the host app (issue 10) ------------------------------------------------------------------------------
    _req(
        "app:launch",
        "the-host-app",
        "`computer-use app` serves MCP and the console, prints both URLs; Ctrl-C leaves no process",
    ),
    _req(
        "app:console-auth",
        "the-host-app",
        "the console's port answers only the console: secret path, Origin and Host checks",
    ),
    _req(
        "app:pages",
        "the-host-app",
        "a URL opens as a Page in a window left/right/above/below the chat; a per-Page access switch",
    ),
    _req("app:turns", "the-host-app", "a turn may use only the Pages the user ticked for it (none by default)"),
    _req(
        "app:tokens-over-http",
        "the-host-app",
        "each tool call goes over MCP HTTP with a token minted for it, never seen by the model",
    ),
    _req("app:live-cards", "the-host-app", "each tool call is a card updated in place; model text streams in"),
    _req(
        "app:needs-user",
        "the-host-app",
        "needs_user hands over: Continue is a new provider request with a fresh Page Context",
    ),
    _req("app:images-once", "the-host-app", "a screenshot enters the next model request only, then a placeholder"),
    _req(
        "app:backend-setting",
        "the-host-app",
        "the backend setting persists and affects new sessions only; cards show it",
    ),
    _req(
        "app:bad-input",
        "the-host-app",
        "busy turns, closed chat, provider errors and missing keys are visible, nothing lost",
    ),
    _req(
        "app:console-notices",
        "the-host-app",
        "a console notice goes when its cause is gone (the turn it was about ended, the input was corrected) and "
        "never covers the history",
    ),
    _req(
        "app:console-ticks",
        "the-host-app",
        "Page ticks stay across sends until unticked; sending with none ticked warns and starts no turn",
    ),
    _req("app:new-chat", "the-host-app", "New chat clears the history and the transcript and restarts the provider"),
    _req(
        "app:placement",
        "the-host-app",
        "every window the app places lies inside the screen's work area, on the side chosen; no relation changes",
    ),
    _req(
        "app:cards-in-words",
        "the-host-app",
        "cards say what was done in plain words, the raw call one click away; Retry only where a retry can succeed",
    ),
    _req("app:console-clean-load", "the-host-app", "the console loads with no error in its browser console"),
    _req(
        "provider:anthropic",
        "the-host-app",
        "the Anthropic provider speaks the Messages API wire format (local stand-in)",
    ),
    _req(
        "provider:openai",
        "the-host-app",
        "the OpenAI provider speaks the Chat Completions wire format (local stand-in)",
    ),
    _req(
        "provider:script", "the-host-app", "the script provider runs a task file whose steps refer to earlier results"
    ),
    # -- the evaluation set (issue 15) --------------------------------------------------------------------------
    _req(
        "eval:set",
        "evaluations",
        "ten independent, read-only questions over the fixture sites, each with one short, stable answer",
    ),
    _req(
        "eval:runner",
        "evaluations",
        "`computer-use eval` asks each question through the app's agent loop and grades it exactly; exit 0 only if "
        "all pass",
    ),
    # -- third-party clients through user grants (issue 15, item 1) -------------------------------------------------
    _req(
        "connect:grant",
        "third-party-clients",
        "a client launching `computer-use connect` acts only after a console grant; the grant ends at its bound",
    ),
    _req(
        "connect:isolation",
        "third-party-clients",
        "a granted client lists and reaches exactly the granted Pages: 0 CDP commands on any other",
    ),
    _req(
        "connect:revoke",
        "third-party-clients",
        "before a grant and after revoke a call is invalid_capability with 0 backend calls",
    ),
    _req(
        "connect:socket",
        "third-party-clients",
        "pairing is over a 0600 socket in a 0700 dir, peers of another uid closed; no token without a grant",
    ),
    _req(
        "connect:console",
        "third-party-clients",
        "the console shows '<client> asks for browser access' with the client's name clipped and as text",
    ),
    _req(
        "connect:inspector",
        "third-party-clients",
        "the MCP Inspector CLI, configured by docs/clients.md, lists the tool and calls it after a grant",
    ),
    # -- the commands (issue 32) ----------------------------------------------------------------------------------
    _req(
        "cli:help",
        "commands-a-newcomer-trusts",
        "every command's --help describes it and every option with help, default and choices, no internal names",
    ),
    _req(
        "cli:startup-failures",
        "commands-a-newcomer-trusts",
        "a start-up failure is one stderr line with its documented status: no traceback, temp folder or process left",
    ),
    _req(
        "cli:chromium-discovery",
        "commands-a-newcomer-trusts",
        "Chromium is found by CHROMIUM, on PATH and at the usual install paths; if not, the error says how to install",
    ),
    _req(
        "cli:hints",
        "commands-a-newcomer-trusts",
        "a refusal's hint fits the caller: grants for a client through connect, page_context_token for a host",
    ),
    _req(
        "cli:progress",
        "commands-a-newcomer-trusts",
        "a call with a progressToken gets bounded progress notifications, none without; eval shows each question",
    ),
    _req(
        "proof:chat-stability",
        "release-proof-chat-stability",
        "a tool update never rebuilds earlier messages, avatars or markdown",
    ),
    _req(
        "installed:task-set",
        "phase-6-settings-and-installed-acceptance",
        "the installed app on 18100 runs the task set from the console, isolated",
    ),
    _req(
        "installed:backend-switch",
        "phase-6-settings-and-installed-acceptance",
        "a backend change mid-turn moves new sessions only: no double run",
    ),
    # -- every input bounded (issue 11, part 4) ------------------------------------------------------------------
    _req(
        "bounds:every-input",
        "untrusted-by-construction",
        "every string and list argument has a size limit; assertions breadth and depth",
    ),
    _req(
        "bounds:before-backend",
        "untrusted-by-construction",
        "over-limit arguments are invalid_arguments with a hint and 0 CDP commands",
    ),
    _req(
        "bounds:finite-coordinates",
        "untrusted-by-construction",
        "NaN and Infinity for x/y are invalid_arguments, over stdio too",
    ),
    _req(
        "bounds:linear-patterns",
        "untrusted-by-construction",
        "a catastrophic pattern on a long title answers; other connections served",
    ),
    _req(
        "bounds:published",
        "untrusted-by-construction",
        "the tool schema publishes every limit it can express: a value at it passes, one past it is invalid_arguments",
    ),
    _req(
        "bounds:deep-page",
        "untrusted-by-construction",
        "a page nested 1,500 levels deep gives a bounded observation, never target_lost",
        divergences={
            PW: "@playwright/mcp 0.0.83's browser_snapshot fails with 'RangeError: Maximum call stack size exceeded' "
            "(upstream): the observe fails (not target_lost) and the Page stays usable by its other commands",
        },
    ),
    _req(
        "bounds:huge-page",
        "untrusted-by-construction",
        "a 200,000-button page gives a bounded, paginated observation or timeout within observe_timeout; "
        "other connections are served meanwhile",
        notes={
            b: "measured: the upstream snapshot of 200,000 buttons does not finish within the bound, so the outcome is "
            "timeout (PW 30.8 s, CDM 34.8 s, OCC 15.6 s on 2 cores)"
            for b in (PW, CDM, OCC)
        },
    ),
    _req(
        "injection:escaped",
        "untrusted-by-construction",
        "page strings are cleaned and escaped: one whole line per real element, no "
        "forged field, state or ref; cuts carry the runtime's marker",
    ),
    _req(
        "injection:framed",
        "untrusted-by-construction",
        "the observation sits between per-frame nonce lines page text cannot reproduce",
    ),
    _req(
        "injection:utf16",
        "untrusted-by-construction",
        "lone surrogates from a page become U+FFFD; every result encodes as UTF-8",
    ),
    _req(
        "injection:refs-unguessable",
        "untrusted-by-construction",
        "refs planted in page text or kept from an earlier observation give stale_observation with 0 writes "
        "(an act's frame keeps only the refs of the elements the act left the same)",
    ),
    _req(
        "keys:one-chord",
        "untrusted-by-construction",
        "press is exactly one key or chord; several keys are invalid_arguments, 0 CDP",
    ),
    _req(
        "policy:names",
        "untrusted-by-construction",
        "sensitive names are caught after NFKC, zero-width, bidi and look-alike folding, in "
        "ten languages, on roles beyond button and link, and when the accessible name hides the visible words",
    ),
    _req(
        "policy:press-commits",
        "untrusted-by-construction",
        "Enter or Space is checked on the focused element and the form it submits",
    ),
    _req(
        "policy:point-commits",
        "untrusted-by-construction",
        "a click by point is checked on the element under the point (shadow roots)",
    ),
    _req(
        "policy:select-commits",
        "untrusted-by-construction",
        "a select whose change submits its form, or a sensitive option, is needs_user",
    ),
    _req(
        "policy:type-submit-commits",
        "untrusted-by-construction",
        "type with submit is checked by the form's submit control and action",
    ),
    _req(
        "policy:structure",
        "untrusted-by-construction",
        "login, card and CAPTCHA structure is found in shadow roots, same-origin and "
        "cross-origin frames (any depth) and payment iframes",
    ),
    _req(
        "policy:moment-of-act",
        "untrusted-by-construction",
        "the element is re-read just before the input; a control that can rename "
        "itself under the pointer is refused with 0 writes",
    ),
    _req(
        "policy:shadow-dom",
        "untrusted-by-construction",
        "a sensitive control inside an open shadow root is needs_user by ref, as the same control in the light DOM, "
        "0 writes",
    ),
    _req(
        "policy:pointer-truth",
        "untrusted-by-construction",
        "a click is judged with the pointer already where it presses: a control the hover reveals or renames, or "
        "one that renames itself as it is pressed, gets the same verdict by ref and by point, with 0 writes",
    ),
    _req(
        "policy:hover-reveals",
        "untrusted-by-construction",
        "a scroll to a ref rests the pointer on it: the act's answer lists what the hover revealed, reachable by ref",
    ),
    _req(
        "policy:navigation",
        "untrusted-by-construction",
        "navigate off the authorized origin, or to a side-effect address, is needs_user",
    ),
    _req(
        "fuzz:boundary",
        "untrusted-by-construction",
        "(backend-independent: the boundary is in front of every backend; run on the default one) "
        "Hypothesis calls at the MCP boundary (in-process and a stdio share): no crash, no hang, "
        "one envelope with one of the eleven reason codes, 0 CDP commands for refusals; count and seed reported",
    ),
    _req(
        "protocol:stdio-every-line-answered",
        "untrusted-by-construction",
        "(backend-independent: nothing reaches a backend) over stdio every line is answered: "
        "lone surrogates as U+FFFD, "
        "not JSON -32700, no JSON-RPC message -32600, over 16 MiB -32600; the next call is answered",
    ),
    _req(
        "protocol:invalid-arguments",
        "tool-conventions",
        "malformed arguments get invalid_arguments, a hint, no CDP call",
    ),
    _req(
        "protocol:stdio",
        "phase-1-the-mcp-server",
        "a real client over stdio lists one tool and is refused without a token",
    ),
    _req("protocol:http", "adapters", "a real client over streamable HTTP lists one tool, refused without token"),
    _req(
        "http:symmetric",
        "plain-http-api",
        "the same task (list_pages, observe, act, verify) through MCP and through POST /v1/computer_use gives the "
        "same results field by field, ids and timings aside",
    ),
    _req(
        "http:errors-symmetric",
        "plain-http-api",
        "(backend-independent: nothing reaches a backend) invalid arguments, a missing token and a replayed token "
        "get the same envelope through MCP and HTTP, 0 CDP calls",
    ),
    _req(
        "http:origin-refused",
        "plain-http-api",
        "(backend-independent) a request with an Origin header gets 403, even with a valid token: nothing reaches "
        "the service, 0 CDP calls",
    ),
    _req(
        "http:token-required",
        "plain-http-api",
        "(backend-independent) over HTTP no token, or a token minted for another connection id, is "
        "invalid_capability before any backend call",
    ),
    _req(
        "http:request-limits",
        "plain-http-api",
        "(backend-independent) only POST (405), only application/json (415), at most 64 KiB (413), a loopback Host "
        "(421), the bearer token when configured (401), malformed JSON 400 invalid_arguments: none reaches the "
        "service",
    ),
    _req(
        "http:same-port",
        "plain-http-api",
        "(backend-independent) computer-use serve --transport http answers POST /v1/computer_use on its MCP port",
    ),
    _req(
        "protocol:third-party-client",
        "phase-1-the-mcp-server",
        "the MCP Inspector CLI gets one tool and a structured refusal",
    ),
    _req("protocol:tool-table", "tool-conventions", "docs/mcp.md's tool table and reason codes match the live server"),
    _req(
        "protocol:schema-described-bounded",
        "tool-conventions",
        "every field of the input schema at every level has a description, every string a maxLength, every array a "
        "maxItems",
    ),
    # -- policy and content ------------------------------------------------------------------------------------
    _req("policy:login", "needs-user", "a sign-in form is the user's: needs_user, 0 writes"),
    _req("policy:captcha", "needs-user", "a CAPTCHA is the user's: needs_user, 0 writes"),
    _req(
        "policy:sensitive",
        "needs-user",
        "payment and deletion are the user's: needs_user, 0 writes",
    ),
    _req(
        "policy:allow-once",
        "needs-user",
        "a write handed over for its name alone is performed once when the user allows it, and no other write, frame "
        "or second use; sign-in is never offered",
    ),
    _req(
        "policy:dialog",
        "needs-user",
        "a JS dialog an action opens is the user's: needs_user, 0 writes until they answer, usable after",
    ),
    _req("policy:reading-allowed", "policy", "reading a sign-in page is still allowed"),
    _req(
        "injection:no-effect",
        "untrusted-page-content",
        "page text changes no target, permission or action count; 0 attacker hits",
    ),
    # -- lifecycle ---------------------------------------------------------------------------------------------
    _req(
        "lifecycle:observe-creates-session",
        "page-identity-and-lifecycle",
        "the first observe creates a ComputerSession and a frame",
    ),
    _req(
        "lifecycle:frame-advances-after-write",
        "page-identity-and-lifecycle",
        "an act's answer carries a new frame of the session",
    ),
    _req(
        "lifecycle:access-disabled",
        "page-identity-and-lifecycle",
        "disabling access stops the next call and stales the context",
    ),
    _req(
        "lifecycle:target-replaced",
        "page-identity-and-lifecycle",
        "a replaced target loses the session bound to the old one",
    ),
    _req(
        "lifecycle:target-crashed", "page-identity-and-lifecycle", "a crashed target is target_lost for act and verify"
    ),
    _req("lifecycle:target-closed", "page-identity-and-lifecycle", "a closed target is target_lost"),
    _req(
        "lifecycle:popup-is-a-new-page",
        "popups-and-concurrency",
        "a popup becomes a new Page, unauthorized until the host says so",
    ),
    _req(
        "concurrency:write-lease",
        "popups-and-concurrency",
        "a second session cannot write while the first holds the write lease",
    ),
    _req("concurrency:one-frame-one-write", "the-boundary", "two concurrent acts on one frame write exactly once"),
    _req(
        "concurrency:recheck-under-lease",
        "the-boundary",
        "a queued act whose frame went stale or whose Page was disabled while it waited does not write",
    ),
    _req("concurrency:pages-in-parallel", "the-boundary", "sessions on different Pages act in parallel, never cross"),
    _req("sessions:reuse-and-cap", "the-boundary", "observe reuses its turn's session; live sessions capped"),
    _req(
        "sessions:one-per-page",
        "the-boundary",
        "at most one live session (one backend child, one gateway port) per Page and backend, over any number of turns",
    ),
    _req("sessions:idle-close", "the-boundary", "a session unused for the documented idle time closes"),
    _req(
        "sessions:owner",
        "the-boundary",
        "a session is its opener's (turn or grant): another holder of its id is refused, nothing reaches the Page",
    ),
    _req(
        "sessions:end-with-owner",
        "the-boundary",
        "ending a turn or grant ends its sessions at once: child exited, gateway port refusing",
    ),
    _req(
        "sessions:resources-end",
        "the-boundary",
        "an invalidated, evicted or closed session leaves no child, port or fd behind",
    ),
    _req(
        "frames:observe-verify",
        "fixture-scenarios",
        "a Page with a cross-origin iframe is observed, acted on and verified",
    ),
    _req(
        "frames:iframe-refs",
        "fixture-scenarios",
        "every control of the Page and of its cross-origin iframe gets a ref",
        notes={
            CDM: "the upstream keys uids on loaderId_backendNodeId and takes loaderIds from `init` lifecycle events, "
            "which Chromium does not replay for a loaded Page; the gateway sends the missing `init`. A uid still "
            'given to two nodes is dropped as "(not addressable)" rather than risk acting on the wrong one',
        },
    ),
    # -- actions -----------------------------------------------------------------------------------------------
    _req(
        "action:click",
        "the-four-commands",
        "click a ref",
        notes={
            CDM: "the upstream's post-click wait has no failure signal; the runtime's re-observation shows the Page "
            "as it is"
        },
    ),
    _req("action:type", "the-four-commands", "type into a ref (replacing its value)"),
    _req(
        "action:type-submit",
        "the-four-commands",
        "type with submit presses Enter on the field after the text: one Action, one policy read, at most one write",
        notes={
            CDM: "no upstream call types and submits: the runtime types (fill), checks that the field kept the "
            "focus, then presses Enter (press_key), under the same lease and policy read",
            OCC: "no contract call types and submits: the runtime types (form_input), checks that the field kept "
            "the focus, then presses Enter (computer key), under the same lease and policy read",
        },
    ),
    _req(
        "action:type-submit-focus-moved",
        "the-four-commands",
        "type with submit submits the typed field's form even if the Page moves the focus while the text goes "
        "in; Enter never reaches another element",
        divergences={
            CDM: "the runtime presses Enter itself, and a key goes to the focused element: with the focus moved "
            "it refuses (stale_observation; the text is typed, 0 writes) rather than commit something else",
            OCC: "the runtime presses Enter itself, and a key goes to the focused element: with the focus moved "
            "it refuses (stale_observation; the text is typed, 0 writes) rather than commit something else",
        },
        notes={PW: "browser_type presses Enter on the field itself (Playwright focuses it first)"},
    ),
    _req(
        "action:type-multiline",
        "the-four-commands",
        "type text with a line break into a textarea",
        divergences={
            CDM: "fill types short values key by key, where \\n is an Enter press that would submit a "
            "form: newline, CR and NUL are refused before anything is sent"
        },
    ),
    _req("action:press", "the-four-commands", "press a key on the focused element"),
    _req(
        "action:press-on-ref",
        "the-four-commands",
        "press a key on a given ref",
        divergences={
            PW: "browser_press_key presses on the focused element only; focusing first would be a second call",
            CDM: "press_key presses on the focused element only; focusing first would be a second call",
            OCC: "computer key presses on the focused element only; focusing first would be a second call",
        },
    ),
    _req(
        "action:scroll",
        "the-four-commands",
        "scroll a ref into view",
        notes={PW: "a hover: the direction is ignored", CDM: "a hover: the direction is ignored"},
    ),
    _req(
        "action:scroll-without-ref",
        "the-four-commands",
        "scroll the viewport in a direction",
        divergences={
            CDM: "no wheel or scroll tool upstream (the keyboard would be a write to the focused "
            "element): refused; scroll to a ref instead"
        },
    ),
    _req(
        "action:point-scroll",
        "cost-and-boundaries",
        "scroll at a point right after a screenshot",
        divergences={
            PW: "the wheel tool has no position; moving the mouse first would be a second call: refused",
            CDM: "no wheel or scroll tool upstream: refused",
        },
    ),
    _req("action:select", "the-four-commands", "select one option of a native select by its visible label"),
    _req(
        "action:select-by-value",
        "the-four-commands",
        "select one option of a native select by its value attribute",
        divergences={
            CDM: "fill picks a native select's option by its visible label only: a value is refused "
            'upstream ("Could not find option"), nothing selected'
        },
    ),
    _req(
        "action:navigate",
        "the-four-commands",
        "navigate to an absolute http(s) URL",
        notes={CDM: "navigate_page reports a failed navigation as success; the adapter turns it into an error"},
    ),
    _req("action:point-click", "cost-and-boundaries", "click at a point right after a screenshot"),
    _req("verify:element-state", "verify", "element_state checks value and checked on the live Page"),
    _req("verify:text", "verify", "text_present checks the live Page's text"),
    *_reasons(),
    # -- budgets -----------------------------------------------------------------------------------------------
    _req(
        "budget:tools-list",
        "budgets",
        "a model reads at most 1,100 o200k tokens of the tool (name, description, input schema), tools/list costs at "
        "most 1,450, and every parameter and result field is described where a model reads it",
    ),
    _req(
        "budget:observe-per-element",
        "budgets",
        "observe costs at most 13 tokens per interactive element (target 10, recorded)",
    ),
    _req(
        "budget:no-unreachable-element",
        "budgets",
        "every element stays reachable through follow-up reads of the same frame",
    ),
    _req("bench:act-latency", "budgets", "act latency against the raw upstream is measured (not asserted)"),
    _req(
        "bench:remote-latency",
        "the-runtime-on-a-remote-browser",
        "observe and act p50 on a local and on a remote browser through a front door are measured (not asserted)",
    ),
    _req(
        "bench:task-cost",
        "cost",
        "what a model reads per task (tool definitions once, every answer, the calls) is measured for ours and the "
        "raw @playwright/mcp and chrome-devtools-mcp doing the same steps in one run; a task not done is FAILED",
    ),
    _req(
        "bench:overhead",
        "cost",
        "the runtime's own time per act beyond its backend's (p50) is measured per phase, budget one frame "
        "interval plus 2 ms, 18.7 ms, beyond the pointer's wait for the Page (not asserted)",
    ),
    _req(
        "budget:realistic-pages",
        "cost",
        "on a link-heavy article, a shop listing with image links and a form with help text, every interactive "
        "element is listed, named alike on every backend, its line within 11 tokens per element (target 10, "
        "recorded)",
    ),
    _req(
        "delta:changes-only",
        "cost",
        "after a write, act tells only what changed against the act's frame (changed, added, removed, unchanged "
        "count); an act that changes one element of the catalogue costs at most 150 tokens",
    ),
    _req(
        "delta:refs-kept",
        "cost",
        "the ref of an element that is still the same after an act is the same element in the new frame; "
        "nothing is carried across documents",
    ),
    _req(
        "budget:observation-cap",
        "cost",
        "one observation costs at most the cap (a setting, 2,000 tokens by default), on a 200,000-button page too; "
        "next_offset reaches every element of the frame exactly once",
    ),
    _req(
        "probe:world-per-document",
        "cost",
        "the runtime's probe keeps one isolated world per document (a new one after a navigation, a gone one "
        "replaced on the spot), so a policy read costs no world per frame per act",
    ),
    _req(
        "observe:viewport-first",
        "cost",
        "a Page that does not fit one observation is read from its viewport first, then in document order; the "
        "in-view read stays bounded on a 200,000-button page",
    ),
    _req(
        "observe:scoped",
        "cost",
        "an observe with a query lists only the elements whose name, value or nearby text has its words, for a "
        "fraction of the whole frame's tokens; its refs act and answer in changes; a later whole read lists all",
    ),
    _req(
        "observe:regions",
        "cost",
        "a frame that does not fit one read names its regions (landmarks, forms, dialogs, lists, tables); an observe "
        "within one lists only its elements and text; a query matches the text of the card an element sits in; a "
        "region ref not of the latest frame is refused",
        divergences={
            CDM: "take_snapshot is Puppeteer's 'interesting' tree, which leaves out unnamed lists and list items: "
            "no list regions, and no card text for a query to match (names and values still match)"
        },
    ),
    # -- the scoped gateway ------------------------------------------------------------------------------------
    _req(
        "gateway:discovery-only-bound",
        "scoped-cdp-gateway",
        "target discovery (HTTP and CDP) shows only the bound Page",
    ),
    _req(
        "gateway:refuses-other-targets",
        "scoped-cdp-gateway",
        "commands on other targets, new pages, cookies and browser control are refused",
    ),
    _req("gateway:auto-attach", "scoped-cdp-gateway", "browser-level auto-attach becomes one attach to the bound Page"),
    _req("gateway:iframe-sessions", "scoped-cdp-gateway", "session-level auto-attach reaches the bound Page's iframe"),
    _req("gateway:absorbs-focus", "scoped-cdp-gateway", "focus and download-behaviour methods are absorbed"),
    _req("gateway:page-endpoint", "scoped-cdp-gateway", "the page endpoint serves only the bound Page"),
    _req("gateway:malformed-frame", "scoped-cdp-gateway", "a malformed frame closes only that client, with a reason"),
    _req(
        "gateway:quiet",
        "scoped-cdp-gateway",
        "the gateway alone makes one browser-level discovery call, none on a page",
    ),
    _req("gateway:close", "scoped-cdp-gateway", "closing the gateway closes every client connection"),
    # -- the runtime on a remote browser (issue 34) ------------------------------------------------------------
    _req(
        "remote:websocket-upstream",
        "the-runtime-on-a-remote-browser",
        "a gateway on a browser WebSocket with headers and no /json upstream serves its backend /json all the same",
    ),
    _req(
        "remote:isolation",
        "the-runtime-on-a-remote-browser",
        "through a farm's front door to a browser on another host, the isolation canaries hold",
    ),
    _req(
        "remote:parity-task",
        "the-runtime-on-a-remote-browser",
        "through the door, the dom_form task gives its declared outcome signature",
    ),
    _req(
        "remote:door-only",
        "the-runtime-on-a-remote-browser",
        "the remote browser is reached only through its door, which serves no /json; its pages load across the network",
    ),
    _req(
        "remote:header-refused",
        "the-runtime-on-a-remote-browser",
        "a wrong or missing header is one line naming the refusal and the flags, never the header's value",
    ),
    _req(
        "remote:skip-reason",
        "the-runtime-on-a-remote-browser",
        "without root or ip the remote proofs skip with the reason",
    ),
    _req(
        "remote:cleanup",
        "the-runtime-on-a-remote-browser",
        "the namespace, its veth pair and its processes are removed on close, and after a run that died",
    ),
    _req("gateway:secret-url", "the-boundary", "a gateway URL without its secret is 404, with an Origin 403"),
    _req("gateway:page-script-refused", "the-boundary", "a page script reaches no gateway, nor Chromium's WS"),
    _req(
        "browser:debugging-pipe",
        "the-boundary",
        "a Chromium the runtime launches opens no TCP debugging port; its pipe is served to the user only",
    ),
    _req(
        "gateway:local-user",
        "the-boundary",
        "another local user finds no gateway secret on a command line, and with one is refused before any CDP call",
    ),
    _req("gateway:page-allowlist", "the-boundary", "only what a backend needs passes; the rest is refused"),
    _req("gateway:missing-target", "scoped-cdp-gateway", "a gateway for a target that does not exist refuses to start"),
    _req(
        "gateway:events", "scoped-cdp-gateway", "popups, crashes, closes and a lost browser are reported to the runtime"
    ),
    _req(
        "gateway:upstream-scoped",
        "three-backends",
        "the backend's upstream, behind the gateway, works on the bound Page and never touches another",
    ),
    _req(
        "observe:diagnostics",
        "three-backends",
        "observe with detail=diagnostics adds the Page's latest console errors and failed requests: counted, at "
        "most ten of each, cleaned, quoted and cut, urls without query, inside the frame's nonce lines",
        divergences={
            PW: "the spec gives console/network diagnostics to chrome_devtools_mcp only: refused before any read "
            "(invalid_arguments, hint: observe with another detail)",
            OCC: "its tool contract has no console or network reader: refused before any read (invalid_arguments, "
            "hint: observe with another detail)",
        },
    ),
    _req(
        "observe:diagnostics-own-page",
        "three-backends",
        "a diagnostics observation never shows another Page's console errors or requests",
        divergences={
            PW: "no diagnostics at all (observe:diagnostics)",
            OCC: "no diagnostics at all (observe:diagnostics)",
        },
    ),
    # -- backend adapters --------------------------------------------------------------------------------------
    _req("adapter:snapshot", "three-backends", "a snapshot lists controls with roles, names, state and the text"),
    _req("adapter:compact-snapshot", "budgets", "a large snapshot renders in far fewer tokens than raw"),
    _req("adapter:one-write", "three-backends", "type, select and click make exactly one write, no screenshot"),
    _req("adapter:refs-only", "three-backends", "only the upstream's own ref syntax is sent; selectors never are"),
    _req("adapter:unique-refs", "three-backends", "a ref names exactly one element"),
    _req("adapter:element-errors", "three-backends", "an element that cannot be acted on is an element error"),
    _req(
        "adapter:dialog-never-answered",
        "three-backends",
        "a JS dialog is never answered; the next observation is an error, no write",
    ),
    _req("adapter:target-lost", "three-backends", "after the page closes every call is target_lost at the adapter"),
    _req(
        "adapter:timeout",
        "three-backends",
        "an upstream call past its timeout is a timeout; the child stays usable",
        notes={CDM: "a timed-out call is not aborted upstream: the next call waits behind it (same outcome, later)"},
    ),
    _req("adapter:cancel", "three-backends", "a cancelled call propagates; the child stays consistent"),
    _req("adapter:one-screenshot", "three-backends", "a screenshot is exactly one viewport capture"),
    _req("adapter:point-click", "cost-and-boundaries", "a point click reaches the page"),
    _req("adapter:scroll-to-ref", "the-four-commands", "a scroll to a ref moves the viewport to it"),
    _req(
        "adapter:child-hygiene",
        "three-backends",
        "the child runs in its workdir, writes nothing outside, leaves no process behind",
    ),
    _req("adapter:allowlist", "three-backends", "no tool outside the allowlist is ever called"),
    _req("adapter:one-upstream-call", "three-backends", "every canonical Action maps to exactly one upstream call"),
    _req(
        "adapter:error-kinds",
        "three-backends",
        "upstream error texts map to the error kinds (lost, timeout, element, dialog, other)",
    ),
    _req("adapter:parser", "three-backends", "the snapshot parser reads captured answers exactly"),
    _req(
        "adapter:one-role-vocabulary",
        "a-house-easy-to-live-in",
        "every backend lists elements in one role vocabulary: a colour, date or time field is a textbox with its "
        "value, a grid's cell a gridcell; an image's name is text",
        notes={
            CDM: "the upstream leaves out what nothing in it can focus (Puppeteer's interesting-only tree): a grid "
            "cell without a tabindex is its text only, a named blockquote's name is not read",
        },
    ),
    # -- the lab and pure rules ----------------------------------------------------------------------------------
    _req("lab:browser", "instruments", "Chromium launches and closes cleanly, or says in one line why not"),
    _req("lab:costs", "budgets", "the cost summary flags every figure above its budget"),
    _req(
        "lab:console-driver",
        "instruments",
        "the one console driver acts only on a control a person could use (attached, visible, still, enabled, not "
        "covered), waits for it inside the page, says why it never could, and sees that a tick took",
    ),
    _req(
        "lab:report",
        "cost",
        "the report carries the cost summary, its plot and the parity table on its front page, and groups tests by "
        "release proof, backend and requirement",
    ),
    _req("lab:fixture-server", "instruments", "stall routes, bounded waits, reset"),
    _req(
        "lab:mutation",
        "instruments",
        "make mutation runs mutmut over the named security-critical functions; a renamed one is reported, and only a "
        "failing test kills a mutant",
    ),
    _req(
        "lab:selection",
        "where-suites-run",
        "make test collects release-proof and backend contract tests on every backend and the others on the default "
        "one; make lab collects every test on every backend",
    ),
    _req(
        "lab:shards",
        "sharded-acceptance-runs",
        "the shards of a sharded run hold every collected test exactly once, a test with no recorded duration "
        "included, and their merged results and cost summary are the unsharded run's",
    ),
    _req("lab:ledger", "instruments", "one real write is one ledger row, read once, per test"),
    _req("lab:scenarios", "instruments", "every scenario's routes, writes and attacker endpoint behave as declared"),
    _req("lab:tap", "instruments", "the CDP tap counts exactly what reached each target"),
    _req("lab:tokens", "instruments", "the token meter counts o200k_base exactly, images by size"),
    _req("lab:workspace", "instruments", "the window shell's geometry is real and read back"),
    _req(
        "unit:capability-token", "capability-token", "a token opens to exactly its claims; anything edited is refused"
    ),
    _req(
        "unit:dependencies",
        "layout-and-dependencies",
        "the runtime imports mcp, pydantic, aiohttp, re2 only; the host no backend; the lab never what it measures",
    ),
    _req(
        "lab:seams",
        "a-house-easy-to-live-in",
        "negative controls replace named, public seams only: no suite overrides a private method of a runtime or "
        "host class",
    ),
    _req("unit:class-size", "a-house-easy-to-live-in", "no class in runtime/ or host/ is over 300 lines"),
    _req(
        "unit:import-graph",
        "a-house-easy-to-live-in",
        "no modules of runtime/ or backends/ import one another in a circle",
    ),
    _req(
        "unit:unique-names",
        "a-house-easy-to-live-in",
        "no two top-level classes or constants of runtime/, host/ and backends/ share a name",
    ),
    _req(
        "unit:approvals",
        "needs-user",
        "an approval holds once, for the write, frame, session and host it was granted for, and expires",
    ),
    _req("unit:models", "policy", "actions and assertions reject what would prove or do nothing"),
    _req("unit:policy-rules", "policy", "login, CAPTCHA and sensitive writes go to the user"),
    _req("unit:relation", "page-registry", "relations are computed from window bounds"),
    _req("unit:rendering", "policy", "observation rendering is bounded and loses no element"),
    *(
        _req(
            f"realapps:{app}",
            "real-apps",
            f"{what}: every step right on the first try, by the runtime's answer and "
            "by the lab's own reading of the app's state",
            divergences=divergences,
        )
        for app, what, divergences in (
            (
                "swagger",
                "Swagger UI (React): filter, expand, Try it out, type a body, Execute (a write), verify, hover a row "
                "(a scroll by ref), copy its path (a control the hover reveals)",
                {},
            ),
            (
                "datatables",
                "DataTables + jQuery, 144 rows: search (type + submit), sort, page, page length, verify",
                {},
            ),
            ("jsoneditor", "JSONEditor (plain ES): collapse, expand, untick a boolean, search, verify", {}),
            ("svelte-jsoneditor", "svelte-jsoneditor (Svelte): toggle a boolean, text mode, verify, tree mode", {}),
            ("tinymce", "TinyMCE (editing area in an iframe): align, justify, undo, verify the iframe's text", {}),
            (
                "ionic",
                "Ionic (Stencil, shadow DOM): type, a toggle, a checkbox, an accordion, verify a checkbox",
                {},
            ),
            (
                "shoelace",
                "Shoelace (Lit, shadow DOM): type, a custom select, type, open details, verify a field",
                {},
            ),
            (
                "rapidoc",
                "RapiDoc (Lit, nested shadow roots, long list): a schema tab, TRY an operation, verify",
                {},
            ),
        )
    ),
)

LEDGER: dict[str, Requirement] = {r.id: r for r in REQUIREMENTS}
assert len(LEDGER) == len(REQUIREMENTS), "duplicate requirement ids"


@dataclass(frozen=True)
class Proof:
    """A release proof (docs/requirements.md, "Spec 003: the release proofs"): its claim, the instrument its figures
    come from (never the runtime's own word), the suite that runs it and the requirements it is made of.
    `suites/parity/test_ledger.py` checks that each proof has a negative control naming one of its requirements: a
    proof whose check cannot fail is visible."""

    name: str
    claim: str
    instrument: str
    suite: str
    requirements: tuple[str, ...]


RELEASE_PROOFS: tuple[Proof, ...] = (
    Proof(
        "tool surface",
        "one tool, computer_use; no upstream tool; docs/mcp.md true to the live server",
        "`tools/list` from a real MCP client; the docs tables parsed and compared field by field",
        "suites/protocol",
        ("protocol:one-tool", "protocol:tool-table"),
    ),
    Proof(
        "page isolation",
        "with A authorized, nothing reads or writes B, the chat Page or another window; bad tokens stop first",
        "CDP tap (runtime side): commands per target; canaries: bytes seen by a second tap between the backend "
        "child and its gateway, and bytes of every tool result",
        "suites/isolation",
        (
            "isolation:b-untouched",
            "isolation:chat-untouched",
            "isolation:other-window-untouched",
            "isolation:unauthorized-page",
            "capability:missing",
        ),
    ),
    Proof(
        "backend frozen per session",
        "a running ComputerSession keeps its backend; the setting affects only the next session",
        "session records and the tap's connection ids per session",
        "suites/parity/test_backend_freeze.py",
        ("freeze:running-session-keeps-backend", "freeze:next-session-uses-new-backend"),
    ),
    Proof(
        "one write per Action",
        "one Action makes at most one real write; a failure never starts another backend",
        "fixture write ledger (one row per real write, attributed to the Page that wrote it)",
        "suites/parity/test_backend_freeze.py, suites/honesty",
        ("writes:at-most-one", "freeze:failure-never-switches"),
    ),
    Proof(
        "cross-backend parity",
        "each task has its declared outcome signature on every backend, and the same one across backends",
        "per-step outcome signatures (results, write ledger, tap) against expectations declared as data",
        "suites/parity/test_parity_tasks.py",
        tuple(f"parity:{name}" for name in ("dom_form", "catalogue", "login", "captcha", "sensitive")),
    ),
    Proof(
        "page awareness",
        "a swap updates relation and preview in the next request; focus and pane moves keep the binding",
        "the Page Registry against real window bounds read from the browser",
        "suites/registry",
        ("awareness:swap-left-right",),
    ),
    Proof(
        "non-foreground execution",
        "an occluded, minimized or unfocused Page is operated with 0 focus or OS-input calls",
        "tap focus/input categories; the Page's visibility and focus read through the lab's own connection",
        "suites/foreground",
        ("foreground:no-focus-calls",),
    ),
    Proof(
        "visual limits",
        "a DOM flow takes 0 screenshots; a canvas observation at most 1",
        "tap `Page.captureScreenshot` counts",
        "suites/visual",
        ("visual:dom-zero-screenshots", "visual:canvas-one-screenshot"),
    ),
    Proof(
        "failure honesty",
        "an empty assertion, a stale frame, a timeout, a cancel or a lost target is never success",
        "tool results and the write ledger",
        "suites/honesty, suites/reliability/test_cancellation.py",
        ("honesty:timeout", "honesty:stale-frame", "honesty:empty-assertion", "honesty:target-lost"),
    ),
    Proof(
        "chat stability",
        "tool updates do not rebuild the history's message, avatar or markdown DOM",
        "a MutationObserver in the real console Page",
        "suites/chat",
        ("proof:chat-stability",),
    ),
)


def proof_of(requirements: Iterable[str]) -> Proof | None:
    """The release proof a test belongs to: the first whose requirements include one the test names (its
    `@pytest.mark.req` ids, a negative control's too). A test naming none belongs to none, whatever its suite:
    `suites/selection.py` runs it on every backend in `make test` only if it is a backend contract test."""
    named = set(requirements)
    return next((proof for proof in RELEASE_PROOFS if named & set(proof.requirements)), None)


def diverges(requirement: str, backend: str) -> str | None:
    """Why `backend` does not meet `requirement`, or None when it must."""
    return LEDGER[requirement].divergences.get(backend)


def _cell(requirement: Requirement, backend: str) -> str:
    if backend in requirement.divergences:
        return f"diverges: {requirement.divergences[backend]}"
    if backend in requirement.notes:
        return f"✓ ({requirement.notes[backend]})"
    return "✓"


def anchor(heading: str) -> str:
    """The anchor a Markdown renderer (GitHub's rule) gives a heading: lower case, punctuation dropped, spaces to -."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def sections(text: str) -> dict[str, str]:
    """docs/requirements.md's `###` sections: anchor → heading."""
    headings = (line[4:] for line in text.splitlines() if line.startswith("### "))
    return {anchor(heading): heading for heading in headings}


def unsourced(requirements: Iterable[Requirement], known: dict[str, str]) -> list[str]:
    """Both directions: a requirement citing no section of the sources page, and a section nothing cites."""
    requirements = list(requirements)
    cited = {r.source for r in requirements}
    problems = [
        f"{r.id}: its source {r.source!r} is not a section of {SOURCES.name}"
        for r in requirements
        if r.source not in known
    ]
    problems += [
        f"{SOURCES.name}: section {heading!r} is the source of no requirement"
        for key, heading in known.items()
        if key not in cited
    ]
    return problems


def _escape(text: str) -> str:
    return text.replace("|", "\\|")


def markdown(backends: Iterable[str] = BACKENDS) -> str:
    """docs/parity.md: the requirement × backend table, one section per requirement family."""
    backends = list(backends)
    known = sections(SOURCES.read_text(encoding="utf-8"))
    lines = [
        "# Parity: requirement × backend",
        "",
        "<!-- Generated by `python -m suites.parity.ledger --write` (make parity-doc) from suites/parity/ledger.py."
        " Do not edit by hand: `pytest suites/parity` fails when this file and the ledger disagree. -->",
        "",
        "Every requirement the suites prove, where it comes from (its section of [requirements.md](requirements.md)), "
        "and how each backend meets it. ✓: exercised on "
        "that backend by at least one test (`@pytest.mark.req`); *diverges*: the backend does not meet it, for the "
        "reason given, and a test shows the outcome the agent gets instead (a refusal with a reason code, never "
        "another action). A note in brackets is a difference in how, not in outcome.",
        "",
        f"{len(REQUIREMENTS)} requirements; "
        + "; ".join(f"{b}: {sum(1 for r in REQUIREMENTS if b in r.divergences)} divergences" for b in backends)
        + ".",
    ]
    lines += [
        "",
        "## Release proofs and their instruments",
        "",
        "Each proof's figures come from an instrument that shares no code with the runtime; each has a negative "
        "control (`pytest -m negative_control`) that runs the same check against a deliberately broken variant.",
        "",
        "| proof | claim | instrument | suite | requirements |",
        "|---|---|---|---|---|",
    ]
    for proof in RELEASE_PROOFS:
        ids = ", ".join(f"`{i}`" for i in proof.requirements)
        lines.append(
            "| " + " | ".join(_escape(c) for c in (proof.name, proof.claim, proof.instrument, proof.suite, ids)) + " |"
        )
    families: dict[str, list[Requirement]] = {}
    for requirement in REQUIREMENTS:
        families.setdefault(requirement.id.split(":", 1)[0], []).append(requirement)
    for family, requirements in families.items():
        lines += [
            "",
            f"## {family}",
            "",
            "| requirement | source | what | " + " | ".join(backends) + " |",
            "|---|---|---|" + "---|" * len(backends),
        ]
        for r in requirements:
            source = f"[{known.get(r.source, r.source)}]({SOURCES.name}#{r.source})"
            cells = [f"`{r.id}`", _escape(source), _escape(r.text), *(_escape(_cell(r, b)) for b in backends)]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    text = markdown()
    if "--write" in argv:
        DOC.write_text(text, encoding="utf-8")
        print(f"wrote {DOC}")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
