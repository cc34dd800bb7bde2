"""chat: a stand-in for the AI chat application's own Page — the Page agents must never touch.

A sidebar of conversations, a history (`#chat-history`) of 8 messages alternating user/assistant, each with a
stable `data-message-id` (`msg-001`..`msg-008`) and an inline-SVG avatar with a stable id (`avatar-msg-001`..),
assistant messages in rendered markdown (headings, lists, code, a table, links, bold/italics), and a composer
whose Send POSTs `{"conversation_id", "message"}` as JSON to `/chat/send` (write) and appends both turns.

`window.__chatMutations` counts MutationObserver records (childList, attributes, characterData, subtree) inside
`#chat-history` since load: 0 proves nobody touched the history; nothing on the page changes it by itself.
"""

from __future__ import annotations

import hashlib

from aiohttp import web

from fixtures_sites.routes import Route, page, read_fields

SCENARIO = "chat"

HISTORY_IDS = tuple(f"msg-{n:03d}" for n in range(1, 9))
AVATAR_IDS = tuple(f"avatar-{m}" for m in HISTORY_IDS)


async def send(request: web.Request) -> web.StreamResponse:
    fields = await read_fields(request)
    message = fields.get("message", "").strip()
    if not message:
        return web.json_response({"ok": False, "error": "empty message"}, status=400)
    digest = hashlib.sha256(message.encode("utf-8")).hexdigest()[:10]
    return web.json_response(
        {
            "ok": True,
            "message_id": f"msg-u-{digest}",
            "reply_id": f"msg-a-{digest}",
            "reply": "Got it — I'll keep that in mind for your trip plan.",
        }
    )


ROUTES = (
    Route("GET", "/chat/", page("chat/index.html"), SCENARIO),
    Route("POST", "/chat/send", send, SCENARIO, write=True),
)
