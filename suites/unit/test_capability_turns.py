"""Turns, model requests and the Pages a Page Context holds: what the host mints is for the right turn, the right
request and the right Pages, and a new turn ends the old one.

Pure rules, against a stand-in browser that knows a few Pages (their targets and windows) and nothing else: the
registry reads titles, URLs and geometry from it as it would from Chromium.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from runtime.capability.approval import Binding
from runtime.capability.contexts import ContextStore, Host
from runtime.capability.token import open_token
from runtime.capability.verifier import CALL_KEY, TOKEN_KEY, CapabilityVerifier, StaleContext
from runtime.registry.pages import PageRegistry
from suites.harness import Clock
from suites.unit.test_capability import Connection, no_preview

pytestmark = pytest.mark.req("unit:capability-token")


class PagesBrowser:
    """A browser with the targets it is given: `Target.getTargets` lists them, every window has the same bounds."""

    def __init__(self, urls: dict[str, str]) -> None:
        self.urls = urls

    def listen(self, listener: Any) -> None:
        pass

    async def send(self, method: str, params: dict[str, Any] | None = None, **_: Any) -> dict[str, Any]:
        if method == "Target.getTargets":
            infos = [{"targetId": t, "type": "page", "title": f"title of {t}", "url": u} for t, u in self.urls.items()]
            return {"targetInfos": infos}
        if method == "Browser.getWindowBounds":
            return {"bounds": {"left": 0, "top": 0, "width": 800, "height": 600, "windowState": "normal"}}
        raise AssertionError(f"the registry sent {method}")


def ended_turns(store: ContextStore) -> list[tuple[str, str | None]]:
    seen: list[tuple[str, str | None]] = []
    store.listen(lambda host, turn: seen.append((host, turn)))
    return seen


def test_a_new_turn_ends_the_hosts_previous_turn_and_only_that_one(store: ContextStore) -> None:
    ended = ended_turns(store)
    store.begin_turn("host-1", "turn-1")
    store.begin_turn("host-1", "turn-1")  # the same turn again: nothing ends
    store.begin_turn("host-2", "turn-9")  # another host's turn: host-1's goes on
    assert ended == []
    store.begin_turn("host-1", "turn-2")
    assert ended == [("host-1", "turn-1")]
    assert store.turns == {"host-1": "turn-2", "host-2": "turn-9"}


def test_a_host_that_goes_away_ends_every_turn_of_its_own(store: ContextStore) -> None:
    ended = ended_turns(store)
    store.begin_turn("host-1", "turn-1")
    store.forget_host("host-1")
    assert ended == [("host-1", None)]
    assert "host-1" not in store.turns


async def test_turns_requests_and_calls_are_numbered_from_one_and_tokens_carry_them() -> None:
    store = ContextStore(clock=Clock())
    host = Host(PageRegistry(PagesBrowser({})), store, no_preview)  # type: ignore[arg-type]
    turn = host.start_turn([])
    assert turn.id == f"{host.id}-turn-1"
    first, second = await turn.provider_request(), await turn.provider_request()
    assert (first.context.provider_request, first.context.sequence) == (f"{turn.id}-req-1", 1)
    assert (second.context.provider_request, second.context.sequence) == (f"{turn.id}-req-2", 2)
    calls = [second.mint("conn-a")[0], second.mint("conn-a")[0], second.mint("conn-a", "given-call")[0]]
    assert calls == [f"{turn.id}-req-2-call-1", f"{turn.id}-req-2-call-2", "given-call"]
    _, token = second.mint("conn-a", "given-call")
    claims = open_token(token, store.secret)
    assert re.fullmatch(r"given-call:[0-9a-f]{16}", claims.token_id), claims.token_id
    assert (claims.turn, claims.provider_request, claims.tool_call) == (turn.id, f"{turn.id}-req-2", "given-call")


async def test_a_page_context_holds_only_pages_that_are_enabled_present_and_not_reserved(store: ContextStore) -> None:
    browser = PagesBrowser({"t-shop": "http://shop.test/", "t-off": "http://off.test/", "t-chat": "http://chat.test/"})
    registry = PageRegistry(browser)  # type: ignore[arg-type]
    shop, off, chat_origin = [await registry.register(t, n) for n, t in enumerate(browser.urls, 1)]
    gone = await registry.register("t-gone", 9)  # its target is not in the browser's list: lost at the next read
    registry.set_access(off.registry_page_id, False)
    registry.reserve("http://chat.test/")
    turn = Host(registry, store, no_preview).start_turn([p.registry_page_id for p in (shop, off, chat_origin, gone)])
    request = await turn.provider_request()
    assert list(request.context.pages) == [shop.registry_page_id]
    assert request.context.pages[shop.registry_page_id].title == "title of t-shop"


async def test_a_token_for_a_page_that_changed_or_that_the_registry_never_knew_is_stale_and_says_which(
    store: ContextStore,
) -> None:
    browser = PagesBrowser({"t-shop": "http://shop.test/"})
    registry = PageRegistry(browser)  # type: ignore[arg-type]
    shop = await registry.register("t-shop", 1)
    verifier = CapabilityVerifier(store, registry)
    turn = Host(registry, store, no_preview).start_turn([shop.registry_page_id])
    tool_call, token = (await turn.provider_request()).mint("conn-a")
    registry.hide(shop.registry_page_id)  # a new revision of the Page
    with pytest.raises(StaleContext, match=f"Page {shop.registry_page_id} changed since the Page Context was taken"):
        verifier.verify({TOKEN_KEY: token, CALL_KEY: tool_call}, Connection())

    stranger = CapabilityVerifier(store, PageRegistry(PagesBrowser({})))  # type: ignore[arg-type]
    tool_call, token = (await turn.provider_request()).mint("conn-b")
    with pytest.raises(StaleContext, match=f"Page {shop.registry_page_id} is no longer registered"):
        stranger.verify({TOKEN_KEY: token, CALL_KEY: tool_call}, Connection())


def test_an_approval_lives_as_long_as_the_stores_token_lifetime(clock: Clock) -> None:
    store = ContextStore(clock=clock, token_lifetime=5.0)
    binding = Binding("host-1", "s1", "f1", '{"type":"click","ref":"e1"}')
    request = store.approvals.offer(binding, "page-1", "delete", 'button "Delete"', "")
    token = store.approvals.grant(request, "host-1")
    clock.now += 5.0
    assert not store.approvals.redeem(token, binding, "delete", 'button "Delete"')
