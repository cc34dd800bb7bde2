"""canvas: a cinema seat picker drawn on `<canvas>`; which seat is free is visible only in pixels.

The board has `ROWS` x `COLS` seats, numbered 0..SEATS-1 row by row (row letter A.., seat number 1..). Every
seat is drawn taken (grey) or reserved (amber) except one, the target, drawn free (green); `?seat=N` chooses
it, otherwise `DEFAULT_SEAT`. No text, attribute or ARIA property of the page says where it is (the canvas is
labelled only "Seating plan"); the board reaches the page as data inside its script, which draws it.

Clicking the canvas POSTs `{"x": .., "y": ..}` — canvas-relative CSS px, `clientX - rect.left` — as JSON to
`/canvas/pick` (write), with the page's own query string so that `?seat=N` reaches the judge; the answer
`{"ok", "hit", "seat"}` says whether the click landed on the free seat, and the page draws the result.

Finding the target's center in a test: `target_center(seat)` returns it in CSS px relative to the canvas's
top-left corner (the canvas has no border or padding, and its CSS size is fixed at `WIDTH` x `HEIGHT`, so
device pixel ratio and zoom do not matter); add the canvas element's bounding box origin for a viewport
point. By hand: col = seat % COLS, row = seat // COLS,
x = LEFT + col * PITCH + (AISLE if col >= AISLE_AFTER else 0) + PITCH / 2, y = TOP + row * PITCH + PITCH / 2.
A click counts as a hit within the seat's square, SEAT_SIZE px wide, around that center.
"""

from __future__ import annotations

import math

from aiohttp import web

from fixtures_sites.routes import Route, page_with, read_fields

SCENARIO = "canvas"

ROWS, COLS = 9, 14
SEATS = ROWS * COLS
WIDTH, HEIGHT = 720, 540  # canvas CSS size
LEFT, TOP = 48, 104  # top-left corner of seat A1's cell
PITCH = 42  # cell size: distance between neighbouring seats' centers
SEAT_SIZE = 32  # a seat's drawn square, centered in its cell
AISLE_AFTER, AISLE = 7, 28  # columns >= AISLE_AFTER are shifted right by AISLE px
DEFAULT_SEAT = 47  # row D, seat 6


def target_seat(request: web.Request) -> int:
    raw = request.query.get("seat", "")
    return int(raw) if raw.isdigit() and int(raw) < SEATS else DEFAULT_SEAT


def target_center(seat: int = DEFAULT_SEAT) -> tuple[float, float]:
    """The center of `seat` in CSS px relative to the canvas's top-left corner."""
    row, col = divmod(seat, COLS)
    x = LEFT + col * PITCH + (AISLE if col >= AISLE_AFTER else 0) + PITCH / 2
    return x, TOP + row * PITCH + PITCH / 2


def seat_label(seat: int) -> str:
    row, col = divmod(seat, COLS)
    return f"{chr(ord('A') + row)}{col + 1}"


def seat_at(x: float, y: float) -> int | None:
    """The seat whose drawn square contains (x, y), if any."""
    for seat in range(SEATS):
        cx, cy = target_center(seat)
        if abs(x - cx) <= SEAT_SIZE / 2 and abs(y - cy) <= SEAT_SIZE / 2:
            return seat
    return None


def board(target: int) -> str:
    """One character per seat: `f` free (the target), `r` reserved, `t` taken."""
    return "".join(
        "f" if seat == target else ("r" if (seat * 5 + seat // COLS * 3) % 13 == 2 else "t") for seat in range(SEATS)
    )


def _values(request: web.Request) -> dict[str, str]:
    seat = target_seat(request)
    return {
        "BOARD": board(seat),
        "ROWS": str(ROWS),
        "COLS": str(COLS),
        "WIDTH": str(WIDTH),
        "HEIGHT": str(HEIGHT),
        "LEFT": str(LEFT),
        "TOP": str(TOP),
        "PITCH": str(PITCH),
        "SEAT_SIZE": str(SEAT_SIZE),
        "AISLE_AFTER": str(AISLE_AFTER),
        "AISLE": str(AISLE),
    }


def _number(value: str | None) -> float | None:
    try:
        number = float(value) if value is not None else math.nan
    except ValueError:
        return None
    return number if math.isfinite(number) else None


async def pick(request: web.Request) -> web.StreamResponse:
    fields = await read_fields(request)
    x, y = _number(fields.get("x")), _number(fields.get("y"))
    if x is None or y is None:
        return web.json_response({"ok": False, "error": "x and y (canvas CSS px) are required"}, status=400)
    seat = seat_at(x, y)
    return web.json_response(
        {
            "ok": True,
            "hit": seat == target_seat(request),
            "seat": seat_label(seat) if seat is not None else None,
        }
    )


ROUTES = (
    Route("GET", "/canvas/", page_with("canvas/index.html", _values), SCENARIO),
    Route("POST", "/canvas/pick", pick, SCENARIO, write=True),
)
