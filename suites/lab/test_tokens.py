"""The token meter counts what the model would receive: real o200k_base text tokens and ceil(w*h/750) per image.

Expected numbers are pinned, not recomputed from the same BPE tables the meter uses (that would be circular):
token ids published independently of this repo (the hello-world ids, OpenAI's tiktoken cookbook example, a
third-party tiktoken tutorial run against gpt-4o), and counts derived once and frozen here. The negative control
shows the pins are sharp enough to reject the wrong tokenizer.
"""

from __future__ import annotations

import base64
import functools
import json
import math
import struct
import warnings
import zlib
from collections.abc import Callable
from typing import Any

import pytest
from mcp.types import (
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    TextContent,
    TextResourceContents,
)

from lab.tokens import TokenCount, count_text, encoding, image_size, image_tokens, measure

pytestmark = pytest.mark.req("lab:tokens")

# Token ids published outside this repo for o200k_base (GPT-4o).
PUBLISHED_IDS = {
    "hello world": [24912, 2375],
    # OpenAI cookbook, "How to count tokens with tiktoken", o200k_base example.
    "tiktoken is great!": [83, 8251, 2488, 382, 2212, 0],
    # tutorialexample.com "Python tiktoken tutorial", encoding_for_model("gpt-4o").
    "this is a test example, tutorialexample.com": [851, 382, 261, 1746, 4994, 11, 24000, 18582, 1136],
}

# Counts derived once with o200k_base and pinned; chosen to cover markup, JSON, whitespace and non-Latin text,
# where naive estimates and older vocabularies go wrong.
PINNED_COUNTS = {
    **{text: len(ids) for text, ids in PUBLISHED_IDS.items()},
    "Hello, world!": 4,
    "こんにちは世界": 2,
    '<button id="submit">Submit</button>': 9,
    '{"ok":true}': 5,
    " ": 1,
    "\n\n": 1,
}


def png(width: int, height: int) -> bytes:
    """A valid 8-bit greyscale PNG of the given size (all black), built by hand so the test needs no Pillow."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    raw = (b"\x00" + b"\x00" * width) * height
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def jpeg_header(width: int, height: int, sof: int = 0xC0) -> bytes:
    """SOI, a JFIF APP0, a DHT segment (marker C4, inside the SOF range but not a frame), then an SOFn frame."""
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    dht = b"\xff\xc4" + struct.pack(">H", 2 + 17) + b"\x00" + b"\x00" * 16
    frame = struct.pack(">HBHHB", 17, 8, height, width, 3) + b"\x01\x22\x00\x02\x11\x01\x03\x11\x01"
    return b"\xff\xd8" + app0 + b"\xff\xff" + dht + bytes([0xFF, sof]) + frame + b"\xff\xd9"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_the_meter_loads_o200k_base_and_encodes_hello_world_to_the_published_ids() -> None:
    assert encoding().encode("hello world") == [24912, 2375]


@pytest.mark.parametrize(("text", "ids"), PUBLISHED_IDS.items(), ids=list(PUBLISHED_IDS))
def test_the_encoding_reproduces_token_ids_published_elsewhere(text: str, ids: list[int]) -> None:
    assert encoding().encode(text) == ids


@pytest.mark.parametrize(("text", "expected"), PINNED_COUNTS.items(), ids=[repr(t) for t in PINNED_COUNTS])
def test_count_text_matches_the_pinned_o200k_count(text: str, expected: int) -> None:
    assert count_text(text) == expected


def test_the_encoding_is_loaded_once_and_reused() -> None:
    assert encoding() is encoding()


def test_empty_text_costs_nothing() -> None:
    assert count_text("") == 0
    assert measure(CallToolResult(content=[])) == TokenCount(0, 0, 0)


def test_special_token_text_on_a_page_is_counted_as_plain_text_not_rejected() -> None:
    assert count_text("<|endoftext|>") == 7


def test_a_1280x720_png_costs_1229_tokens() -> None:
    data = png(1280, 720)
    assert image_size(data) == (1280, 720)
    assert image_tokens(1280, 720) == 1229 == math.ceil(1280 * 720 / 750)
    assert measure(CallToolResult(content=[ImageContent(data=b64(data), mime_type="image/png")])) == TokenCount(
        text=0, images=1229, image_count=1
    )


@pytest.mark.parametrize("sof", [0xC0, 0xC2], ids=["baseline", "progressive"])
def test_jpeg_size_is_read_from_the_frame_header_not_from_the_huffman_table(sof: int) -> None:
    assert image_size(jpeg_header(800, 600, sof)) == (800, 600)


def test_image_tokens_round_up_so_any_non_empty_image_costs_at_least_one() -> None:
    assert image_tokens(1, 1) == 1
    assert image_tokens(750, 1) == 1
    assert image_tokens(751, 1) == 2
    assert image_tokens(0, 100) == 0


def test_anything_that_is_not_a_png_or_jpeg_is_rejected_rather_than_counted_as_free() -> None:
    with pytest.raises(ValueError, match="not a PNG or JPEG"):
        image_size(b"GIF89a\x01\x00\x01\x00")
    with pytest.raises(ValueError, match="SOF"):
        image_size(b"\xff\xd8\xff\xd9")


def test_text_items_are_counted_separately_and_add_up() -> None:
    texts = ["hello world", '<button id="submit">Submit</button>', "こんにちは世界"]
    result = CallToolResult(content=[TextContent(text=t) for t in texts])
    assert measure(result) == TokenCount(text=9 + 2 + 2, images=0, image_count=0)
    assert measure(result).text == sum(count_text(t) for t in texts)


def test_total_is_text_plus_images_and_counts_add_across_results() -> None:
    one = measure(
        CallToolResult(
            content=[TextContent(text="hello world"), ImageContent(data=b64(png(1280, 720)), mime_type="image/png")]
        )
    )
    assert one == TokenCount(text=2, images=1229, image_count=1)
    assert one.total == 1231
    assert (one + one) == TokenCount(text=4, images=2458, image_count=2)


def test_structured_content_counts_as_compact_json_unless_the_client_drops_it() -> None:
    payload = {"ok": True}
    result = CallToolResult(content=[TextContent(text="hello world")], structured_content=payload)
    assert json.dumps(payload, separators=(",", ":")) == '{"ok":true}'
    assert measure(result).text == 2 + 5
    assert measure(result, structured=False).text == 2


def test_a_wire_dict_and_a_json_rpc_response_measure_the_same_as_the_model() -> None:
    model = CallToolResult(
        content=[TextContent(text="tiktoken is great!"), ImageContent(data=b64(png(100, 100)), mime_type="image/png")],
        structured_content={"ok": True},
        is_error=True,
    )
    wire = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert "structuredContent" in wire
    expected = TokenCount(text=6 + 5, images=14, image_count=1)
    assert measure(model) == expected
    assert measure(wire) == expected
    assert measure({"jsonrpc": "2.0", "id": 7, "result": wire}) == expected


def test_embedded_resources_count_their_text_or_their_image() -> None:
    result = CallToolResult(
        content=[
            EmbeddedResource(resource=TextResourceContents(uri="file:///a.txt", text="hello world")),
            EmbeddedResource(
                resource=BlobResourceContents(uri="file:///a.png", mime_type="image/png", blob=b64(png(1280, 720)))
            ),
        ]
    )
    assert measure(result) == TokenCount(text=2, images=1229, image_count=1)


def test_meta_and_annotations_are_not_counted() -> None:
    plain = CallToolResult(content=[TextContent(text="hello world")])
    decorated = CallToolResult.model_validate(
        {
            "content": [{"type": "text", "text": "hello world", "_meta": {"big": "x" * 500}}],
            "_meta": {"trace": "y" * 500},
        }
    )
    assert measure(decorated) == measure(plain)


def test_a_json_rpc_error_is_not_mistaken_for_an_empty_result() -> None:
    with pytest.raises(ValueError, match="JSON-RPC error"):
        measure({"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "bad"}})


def chars_over_4(text: str) -> int:
    """The common rule of thumb: about four characters per token."""
    return math.ceil(len(text) / 4)


@functools.cache
def _cl100k() -> Any:
    with warnings.catch_warnings():  # bpe_openai's table loader uses a deprecated importlib.resources API
        warnings.simplefilter("ignore", DeprecationWarning)
        import bpe_openai

        return bpe_openai.get_encoding("cl100k_base")


def cl100k(text: str) -> int:
    """The previous OpenAI vocabulary (GPT-4 / GPT-3.5): a real BPE, but the wrong one for o200k budgets."""
    return len(_cl100k().encode_ordinary(text))


@pytest.mark.negative_control
@pytest.mark.parametrize("estimator", [chars_over_4, cl100k], ids=["chars-over-4", "cl100k"])
def test_the_pinned_counts_reject_a_naive_estimator_or_the_wrong_tokenizer(estimator: Callable[[str], int]) -> None:
    disagreements = {
        text: (estimator(text), expected) for text, expected in PINNED_COUNTS.items() if estimator(text) != expected
    }
    assert disagreements, "a wrong tokenizer matched every pinned count: the pins could not catch it"
