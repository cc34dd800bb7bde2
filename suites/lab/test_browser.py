"""Chromium for the lab: a missing browser is a one-line instruction, and close() leaves nothing behind."""

from __future__ import annotations

import pytest

from lab.browser import PrerequisiteMissing, find_chromium, launch
from lab.processes import alive_in_group

pytestmark = pytest.mark.req("lab:browser")


def test_a_missing_chromium_gives_a_one_line_instruction_not_a_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHROMIUM", "/nonexistent/chromium")
    with pytest.raises(PrerequisiteMissing) as missing:
        find_chromium()
    message = str(missing.value)
    assert "make setup" in message
    assert "\n" not in message


async def test_closing_chromium_removes_its_profile_and_every_process_of_its_group() -> None:
    chromium = await launch()
    assert chromium.profile.is_dir()
    client = await chromium.connect()  # ready means the debugging endpoint answers, no waiting needed
    assert "Chrome" in (await client.send("Browser.getVersion"))["product"]
    await client.close()
    pgid = chromium.process.pid
    assert len(alive_in_group(pgid)) >= 2  # the browser and its helpers (zygote, GPU, renderers)
    await chromium.close()
    assert not chromium.profile.exists()
    assert alive_in_group(pgid) == []
