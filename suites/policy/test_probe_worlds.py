"""The probe's isolated world per document (`Worlds.world_in`): made once per document and read again while
the document lives, replaced after a navigation, and a world that went away is replaced on the spot, on a real
Page. Why it matters: every act's policy read asks for the worlds of every frame, and a new one per read was one
round trip per frame and a world left behind in the document each time."""

from __future__ import annotations

import pytest

from fixtures_sites.server import FixtureServer
from lab.tap import CDPTap
from lab.workspace import Workspace
from runtime.cdp import CDPConnection
from runtime.reading.probe import PageProbe, Worlds

pytestmark = pytest.mark.req("probe:world-per-document")


async def test_the_probe_keeps_one_world_per_document_and_a_new_document_gets_a_new_one(
    workspace: Workspace, tap: CDPTap, fixture_server: FixtureServer
) -> None:
    page = await workspace.open("A", fixture_server.url("/dom_form/"), workspace.column(0, 3))
    cdp = await CDPConnection.connect(await tap.endpoint("runtime"))
    probe = PageProbe(cdp, page.target_id)
    try:
        first, again = await probe.frames(), await probe.frames()
        assert [f.world for f in first] == [f.world for f in again]
        assert await probe.evaluate_in(again[0], "location.pathname") == "/dom_form/"

        await workspace.navigate(page, fixture_server.url("/catalogue/"))
        moved = await probe.frames()
        assert moved[0].world != first[0].world, "the world of a document that is gone, after a navigation"
        assert await probe.evaluate_in(moved[0], "location.pathname") == "/catalogue/"
        assert await probe.evaluate_in(first[0], "location.pathname") == "/catalogue/"  # a gone world: replaced
        assert await probe.evaluate("document.title") == await workspace.evaluate(page, "document.title")
    finally:
        await probe.close()
        await cdp.close()


@pytest.mark.negative_control
async def test_the_world_check_catches_a_probe_that_keeps_a_world_across_documents(
    workspace: Workspace, tap: CDPTap, fixture_server: FixtureServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A probe that keys its worlds by frame alone (no loaderId) hands out the world of a document that is gone."""
    keyed = Worlds.world_in

    async def by_frame_only(self: Worlds, session: str, frame: dict) -> int | None:  # type: ignore[type-arg]
        return await keyed(self, session, {**frame, "loaderId": ""})

    monkeypatch.setattr(Worlds, "world_in", by_frame_only)
    with pytest.raises(AssertionError, match="a document that is gone"):
        await test_the_probe_keeps_one_world_per_document_and_a_new_document_gets_a_new_one(
            workspace, tap, fixture_server
        )
