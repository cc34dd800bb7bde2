"""The write ledger: one row per real side effect, so "at most one write" is a count, not an impression.

Modelled on WPT's stash: a row is written once and never changed; the rows of a test are read once with
`take()`, which removes them, so a count can never silently include a previous test's writes.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import asdict, dataclass
from urllib.parse import parse_qsl

NONCE_FIELD = "page_nonce"
"""The form field naming the Page a write came from (the fixture pages that write fill it, one nonce per load)."""


@dataclass(frozen=True)
class LedgerRow:
    """One real write (or one attacker hit) as the fixture server saw it arrive."""

    seq: int
    test_id: str
    scenario: str
    method: str
    path: str
    origin: str
    body_sha256: str
    body_size: int
    referer: str = ""
    """The page that sent it (its `Referer`): which URL a write came from."""
    page_nonce: str = ""
    """The `page_nonce` field of the body: which Page (which load of it) a write came from, even when several
    Pages show the same URL. Empty when the body carries none."""

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def page_nonce_of(body: bytes) -> str:
    """The `page_nonce` field of a urlencoded form or a JSON object body; "" when there is none."""
    text = body.decode("utf-8", "replace")
    if text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except ValueError:
            return ""
        return str(data.get(NONCE_FIELD, "")) if isinstance(data, dict) else ""
    return dict(parse_qsl(text, keep_blank_values=True)).get(NONCE_FIELD, "")


class WriteLedger:
    """Rows of real writes and attacker hits, attributed to the test that was running when they arrived."""

    def __init__(self) -> None:
        self._seq = itertools.count(1)
        self._test_id = "<no test>"
        self._writes: list[LedgerRow] = []
        self._attacker: list[LedgerRow] = []

    @property
    def test_id(self) -> str:
        return self._test_id

    def begin(self, test_id: str) -> None:
        """Attribute every following row to `test_id`; rows of earlier tests are dropped unread."""
        self._test_id = test_id
        self.clear()

    def clear(self) -> None:
        self._writes.clear()
        self._attacker.clear()

    def _row(self, scenario: str, method: str, path: str, origin: str, body: bytes, referer: str = "") -> LedgerRow:
        return LedgerRow(
            seq=next(self._seq),
            test_id=self._test_id,
            scenario=scenario,
            method=method,
            path=path,
            origin=origin,
            body_sha256=hashlib.sha256(body).hexdigest(),
            body_size=len(body),
            referer=referer,
            page_nonce=page_nonce_of(body),
        )

    def record_write(
        self, scenario: str, method: str, path: str, origin: str, body: bytes, referer: str = ""
    ) -> LedgerRow:
        row = self._row(scenario, method, path, origin, body, referer)
        self._writes.append(row)
        return row

    def record_attacker_hit(self, scenario: str, method: str, path: str, origin: str, body: bytes) -> LedgerRow:
        row = self._row(scenario, method, path, origin, body)
        self._attacker.append(row)
        return row

    def writes(self, path: str | None = None) -> list[LedgerRow]:
        """The current test's writes (optionally to one path), without consuming them."""
        return [r for r in self._writes if path is None or r.path == path]

    def attacker_hits(self) -> list[LedgerRow]:
        return list(self._attacker)

    def take(self) -> list[LedgerRow]:
        """Read-once: return the current test's writes and remove them."""
        rows, self._writes = self._writes, []
        return rows

    def snapshot(self) -> dict[str, object]:
        """Everything recorded for the current test, as JSON-ready data (for reports)."""
        return {
            "test_id": self._test_id,
            "writes": [r.as_dict() for r in self._writes],
            "attacker_hits": [r.as_dict() for r in self._attacker],
        }
