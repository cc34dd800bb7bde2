"""Token meter: what an MCP tool result costs the model that reads it.

Why this exists: the lab's cost budgets ("a snapshot must stay under N tokens", "the runtime answers in fewer
tokens than backend X") are only meaningful if they are measured in what the model would actually receive.
Characters, bytes and `len(text) / 4` guesses drift from real token counts by tens of percent (more for
non-Latin text, markup and JSON), which is enough to pass a budget that the model would blow, or to rank two
backends the wrong way round. So text is counted with the real o200k_base BPE (the GPT-4o / o-series
vocabulary), offline, via the `bpe-openai` package, and images with the published per-pixel rule
`ceil(width * height / 750)`, reading the dimensions from the PNG/JPEG header rather than trusting any
caller-supplied size.

What `measure` counts, per MCP content block (mcp 2.3.0 `CallToolResult`, or the same thing as a wire dict):

* `text` — its text.
* `image` — one image: `ceil(w * h / 750)` from the decoded header (PNG IHDR or JPEG SOF).
* `resource` (embedded) — a text resource counts its text; an `image/*` blob counts as an image; any other blob
  counts its base64 string as text (the conservative upper bound: that is what a client that inlines it sends).
* `resource_link` — the compact JSON of the link without `_meta`/`annotations` (clients show the model the link,
  not the resource behind it).
* `structuredContent` — counted by default, as compact JSON (`separators=(",", ":")`, UTF-8 unescaped like
  JavaScript's `JSON.stringify`). Clients that forward structured content to the model pay for it *in addition to*
  the text block the spec asks servers to mirror it in; pass `structured=False` to meter a client that drops it.
* `_meta`, `isError`, annotations — never counted: clients do not hand them to the model.
* `audio` — rejected with ValueError: the browser runtime never emits audio, and a silent 0 would hide a cost.

Known simplification: the image rule does not model a provider's own downscaling of very large images (e.g. to
a ~1.15 megapixel budget), so for screenshots beyond that it over-counts; lab budgets are about screenshots the
runtime already sizes, where the rule is exact.

This module is lab-only and must never import `runtime` or `backends`.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import struct
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mcp.types import CallToolResult

if TYPE_CHECKING:
    import bpe_openai

__all__ = [
    "ENCODING_NAME",
    "PIXELS_PER_IMAGE_TOKEN",
    "TokenCount",
    "count_text",
    "encoding",
    "image_size",
    "image_tokens",
    "measure",
]

ENCODING_NAME = "o200k_base"
"""The BPE vocabulary budgets are expressed in (GPT-4o / o-series)."""

PIXELS_PER_IMAGE_TOKEN = 750
"""One image token per this many pixels, rounded up per image."""

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# JPEG start-of-frame markers carry the frame size; C4 (DHT), C8 (JPG extension) and CC (DAC) share the range
# but are not frames.
_JPEG_SOF_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
# Markers with no length field after them.
_JPEG_STANDALONE_MARKERS = frozenset({0x01, *range(0xD0, 0xD9)})


@dataclass(frozen=True)
class TokenCount:
    """Tokens one tool result costs: `text` tokens, `images` tokens over `image_count` images, and `total`.

    Frozen so a measured cost can be stored next to a result and compared later without anyone mutating it;
    `+` sums the cost of several results (a whole agent turn).
    """

    text: int = 0
    images: int = 0
    image_count: int = 0
    total: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "total", self.text + self.images)

    def __add__(self, other: TokenCount) -> TokenCount:
        if not isinstance(other, TokenCount):
            return NotImplemented
        return TokenCount(self.text + other.text, self.images + other.images, self.image_count + other.image_count)


@functools.cache
def encoding() -> bpe_openai.Encoding:
    """The o200k_base encoding, loaded once per process (loading parses the BPE tables; counting is then cheap).

    `bpe_openai.get_encoding` builds a new Encoding object on every call, hence the cache. The package is imported
    here, not with this module: its import parses every table it ships (1.6 s of CPU), which every pytest worker,
    child pytest and lab process importing the lab would pay without counting a token. Its table loader uses the
    deprecated importlib.resources.open_binary; that DeprecationWarning is not ours to fix and would break suites
    run with warnings as errors.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import bpe_openai

        return bpe_openai.get_encoding(ENCODING_NAME)


def count_text(text: str) -> int:
    """o200k_base tokens in `text`.

    Special-token strings such as `<|endoftext|>` are counted as the ordinary text they are: a web page that
    contains them reaches the model as plain characters, and a meter must not raise on page content.
    """
    if not text:
        return 0
    return len(encoding().encode_ordinary(text))


def image_tokens(width: int, height: int) -> int:
    """Tokens for one `width` x `height` image: ceil(w * h / 750), so any non-empty image costs at least 1."""
    if width < 0 or height < 0:
        raise ValueError(f"image size must be non-negative, got {width}x{height}")
    return -(-width * height // PIXELS_PER_IMAGE_TOKEN)


def image_size(data: bytes) -> tuple[int, int]:
    """(width, height) of a PNG or JPEG, read from its header (PNG IHDR, JPEG SOFn) without decoding pixels.

    Read from the bytes rather than taken from metadata so the meter cannot be fooled by a caller that reports
    a smaller screenshot than it sent. Raises ValueError for anything else or a truncated header.
    """
    if data.startswith(_PNG_SIGNATURE):
        if len(data) < 24 or data[12:16] != b"IHDR":
            raise ValueError("PNG without an IHDR chunk first")
        width, height = struct.unpack(">II", data[16:24])
        return width, height
    if data.startswith(b"\xff\xd8"):
        return _jpeg_size(data)
    raise ValueError(f"not a PNG or JPEG (starts with {data[:8]!r})")


def _jpeg_size(data: bytes) -> tuple[int, int]:
    i = 2
    while i < len(data):
        if data[i] != 0xFF:
            raise ValueError(f"JPEG marker expected at byte {i}")
        while i < len(data) and data[i] == 0xFF:  # markers may be padded with fill bytes
            i += 1
        if i >= len(data):
            break
        marker = data[i]
        i += 1
        if marker in _JPEG_STANDALONE_MARKERS:
            continue
        if marker == 0xD9:  # end of image before any frame header
            break
        if i + 2 > len(data):
            break
        (length,) = struct.unpack(">H", data[i : i + 2])
        if marker in _JPEG_SOF_MARKERS:
            if i + 7 > len(data):
                break
            height, width = struct.unpack(">HH", data[i + 3 : i + 7])
            return width, height
        i += length
    raise ValueError("JPEG without a frame (SOF) header")


def _b64decode(data: str) -> bytes:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"image data is not valid base64: {exc}") from exc


def _compact_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _wire(result: CallToolResult | Mapping[str, Any]) -> dict[str, Any]:
    """Normalise a model, a bare result dict or a whole JSON-RPC response to the wire shape of the result."""
    if isinstance(result, CallToolResult):
        model = result
    elif isinstance(result, Mapping):
        body: Mapping[str, Any] = result
        if "error" in body and "content" not in body:
            raise ValueError(f"JSON-RPC error response, not a tool result: {body['error']!r}")
        if "result" in body and "content" not in body:
            body = body["result"]
        model = CallToolResult.model_validate(body)
    else:
        raise TypeError(f"expected CallToolResult or a dict, got {type(result).__name__}")
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def measure(result: CallToolResult | Mapping[str, Any], *, structured: bool = True) -> TokenCount:
    """Tokens a model receives for one MCP tool result (see the module docstring for what counts and why).

    Accepts an `mcp.types.CallToolResult`, its wire dict (`{"content": [...], "structuredContent": ...}`) or a
    full JSON-RPC response (`{"jsonrpc": "2.0", "id": 1, "result": {...}}`). `structured=False` leaves
    `structuredContent` out, for clients that do not forward it.
    """
    wire = _wire(result)
    text = images = image_count = 0
    for block in wire.get("content", []):
        kind = block.get("type")
        if kind == "text":
            text += count_text(block["text"])
        elif kind == "image":
            images += image_tokens(*image_size(_b64decode(block["data"])))
            image_count += 1
        elif kind == "resource":
            resource = block["resource"]
            if "text" in resource:
                text += count_text(resource["text"])
            elif str(resource.get("mimeType", "")).startswith("image/"):
                images += image_tokens(*image_size(_b64decode(resource["blob"])))
                image_count += 1
            else:
                text += count_text(resource["blob"])
        elif kind == "resource_link":
            link = {k: v for k, v in block.items() if k not in ("_meta", "annotations")}
            text += count_text(_compact_json(link))
        else:
            raise ValueError(f"content block type {kind!r} is not metered")
    if structured and wire.get("structuredContent") is not None:
        text += count_text(_compact_json(wire["structuredContent"]))
    return TokenCount(text=text, images=images, image_count=image_count)
