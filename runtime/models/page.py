"""Page identity as the runtime sees it, and what an agent is shown of it.

A canonical Page is `window_id + registry_page_id + tab_id + cdp_target_id + revisions`. The agent only ever
sees a `PageInfo`: a handle, the Page's relation to the chat Page (computed from real window geometry), its
title, URL and a short preview.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, Field

from runtime.text import PREVIEW_CHARS, TITLE_CHARS, URL_CHARS, clean

Relation = Literal["left", "right", "above", "below", "other_window", "overlapping"]
RELATIONS: tuple[str, ...] = ("left", "right", "above", "below", "other_window")


class Geometry(BaseModel):
    """A window's bounds on the screen, as read back from the browser."""

    left: int
    top: int
    width: int
    height: int
    state: str = "normal"

    @property
    def right(self) -> int:
        return self.left + self.width

    @property
    def bottom(self) -> int:
        return self.top + self.height


class Page(BaseModel):
    """The canonical Page. `revision` bumps whenever anything an authorization depends on changes."""

    registry_page_id: str
    tab_id: str
    window_id: int
    cdp_target_id: str
    workspace: str = Field(description="The host window group the Page's pane belongs to.")
    geometry: Geometry
    title: str = ""
    url: str = ""
    preview: str = ""
    revision: int = 1
    access_enabled: bool = True
    is_chat: bool = False
    opener_page_id: str | None = None


def cleaned(limit: int) -> AfterValidator:
    """Page text, cleaned and cut (`runtime.text.clean`) however a PageInfo is built: registry, host, tests."""
    return AfterValidator(lambda text: clean(text, limit))


class PageInfo(BaseModel):
    """What an agent sees of one authorized Page. Title, url and preview are the page's own words: untrusted."""

    handle: str = Field(description="Pass as `page` to observe.")
    relation: Relation = Field(description="Where the Page is relative to the chat, from real window geometry.")
    title: Annotated[str, cleaned(TITLE_CHARS)]
    url: Annotated[str, cleaned(URL_CHARS)]
    preview: Annotated[str, cleaned(PREVIEW_CHARS)] = Field(
        description="The first words of the Page's text (untrusted page content)."
    )
    revision: int
