"""`computer_use` over stdio, where every request line gets an answer.

The SDK's stdio transport (mcp 2.3, `mcp.server.stdio.stdio_server`) parses each line with pydantic-core and, when
that fails, hands the exception to the server, which logs it at debug level and drops the line. So a line that is
not JSON, a JSON value that is not a JSON-RPC message, or a request whose strings hold a lone-surrogate escape
(`"\\ud800"`, which pydantic-core's parser refuses although JSON allows it) gets no answer at all, and the client
waits until its own timeout. It also reads a line of any length into memory, and an answer holding a lone surrogate
makes its writer raise and end the connection.

This transport is the SDK's, line for line, where a line is fine: the same parser, the same `SessionMessage`s, the
same serialization. Where it is not:

- a line with lone surrogates (in keys or values) is read with them replaced by U+FFFD, then parsed as usual;
- a line that still cannot be read is answered with a JSON-RPC error: `-32700` (parse error) when it is not JSON,
  `-32600` (invalid request) when it is JSON but no JSON-RPC message, with the request's `id` when it has a usable
  one and `null` otherwise (a malformed *response* from the client is only logged: answering it would answer an
  answer);
- a line longer than `MAX_LINE_BYTES` is skipped as it streams in (never held in memory) and answered with
  `-32600` and `id: null`;
- an answer holding lone surrogates is written with them replaced by U+FFFD, and an answer that cannot be written
  at all becomes a `-32603` error for its request.

Like the SDK's transport it claims the process's standard streams while serving: fd 0 reads the null device and
fd 1 writes to stderr, so neither a child process nor a stray `print` can read from or write to the wire.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterator
from contextlib import ExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any, BinaryIO, Protocol

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server import MCPServer
from mcp.shared.message import SessionMessage
from mcp.types import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCMessage,
    JSONRPCResponse,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError
from pydantic_core import PydanticSerializationError

logger = logging.getLogger(__name__)

MAX_LINE_BYTES = 16 * 2**20
"""The longest request line read. Every argument is bounded (docs/mcp.md, Limits): the largest valid call, with every
string at its limit and written as `\\uXXXX` escapes, stays under 5 MiB."""

CHUNK_BYTES = 2**16

_SURROGATE = re.compile("[\ud800-\udfff]")

ReadStream = MemoryObjectReceiveStream[SessionMessage | Exception]
WriteStream = MemoryObjectSendStream[SessionMessage]


class TextSink(Protocol):
    """Where answers go when the caller supplies the stream (the SDK's `anyio.AsyncFile[str]` shape)."""

    async def write(self, text: str, /) -> Any: ...

    async def flush(self) -> Any: ...


class Overlong:
    """A line longer than `MAX_LINE_BYTES`, skipped as it streamed in."""


OVERLONG = Overlong()


def scrub(value: Any) -> Any:
    """`value` (decoded JSON) with every lone surrogate in its strings and keys replaced by U+FFFD."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [scrub(item) for item in value]
    if isinstance(value, dict):
        return {scrub(key): scrub(item) for key, item in value.items()}
    return value


def _error(ident: str | int | None, code: int, message: str) -> JSONRPCError:
    return JSONRPCError(jsonrpc="2.0", id=ident, error=ErrorData(code=code, message=message))


@dataclass(frozen=True)
class RefusedLine:
    """A line the server never sees, and the error that answers it."""

    answer: JSONRPCError


def read_message(line: str) -> JSONRPCMessage | RefusedLine | None:
    """The message on one line, or its refusal, or None for a line to drop (blank, or a malformed response)."""
    try:
        return jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValidationError:
        pass
    if not line.strip():
        return None
    try:
        data = scrub(json.loads(line))
    except (ValueError, RecursionError):
        logger.warning("stdio: answered a line of %d characters that is not JSON", len(line))
        return RefusedLine(_error(None, PARSE_ERROR, "Parse error: the line is not JSON"))
    try:
        return jsonrpc_message_adapter.validate_json(json.dumps(data, ensure_ascii=False), by_name=False)
    except (ValueError, RecursionError):
        pass
    if isinstance(data, dict) and "method" not in data and ("result" in data or "error" in data):
        logger.warning("stdio: dropped a malformed response (id %.40r)", data.get("id"))
        return None
    ident = data.get("id") if isinstance(data, dict) else None
    usable = isinstance(ident, str | int) and not isinstance(ident, bool) and "method" in data
    logger.warning("stdio: answered a line of %d characters that is no JSON-RPC message", len(line))
    return RefusedLine(
        _error(ident if usable else None, INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 message")
    )


def write_message(message: JSONRPCMessage) -> str:
    """One answer as the SDK writes it; lone surrogates (which UTF-8 cannot carry) replaced by U+FFFD."""
    try:
        return message.model_dump_json(by_alias=True, exclude_unset=True)
    except PydanticSerializationError:
        data = message.model_dump(by_alias=True, exclude_unset=True, mode="json")
        return json.dumps(scrub(data), ensure_ascii=False, separators=(",", ":"))


async def bounded_lines(read: Callable[[], Awaitable[bytes]]) -> AsyncIterator[bytes | Overlong]:
    """Lines from `read` (the next chunk; b"" at end of file), each at most `MAX_LINE_BYTES`; a longer
    line comes out as `OVERLONG` once its end arrives, its bytes dropped as they came."""
    pending = bytearray()
    skipping = False
    while chunk := await read():
        start = 0
        while (end := chunk.find(b"\n", start)) != -1:
            if not skipping:
                pending += chunk[start:end]
            yield OVERLONG if skipping or len(pending) > MAX_LINE_BYTES else bytes(pending)
            pending.clear()
            skipping = False
            start = end + 1
        if not skipping:
            pending += chunk[start:]
            if len(pending) > MAX_LINE_BYTES:
                pending.clear()
                skipping = True
    if skipping:
        yield OVERLONG
    elif pending:
        yield bytes(pending)


async def _text_lines(source: AsyncIterable[str]) -> AsyncIterator[bytes | Overlong | str]:
    async for line in source:
        yield OVERLONG if len(line) > MAX_LINE_BYTES else line


@contextmanager
def _claimed(fd: int, diversion: Callable[[], int], mode: str) -> Iterator[BinaryIO]:
    """The wire of standard stream `fd` on a private descriptor, `fd` itself on `diversion()` while serving (see the
    module docstring); restored after."""
    wire = os.dup(fd)
    diverted = diversion()
    try:
        os.dup2(diverted, fd)
    finally:
        os.close(diverted)
    try:
        # closefd=False: a worker thread may still block reading the wire after the transport ends; the descriptor
        # must not be closed and reused under it.
        yield os.fdopen(wire, mode, closefd=False)
    finally:
        os.dup2(wire, fd)


@asynccontextmanager
async def stdio_server(
    stdin: AsyncIterable[str] | None = None, stdout: TextSink | None = None
) -> AsyncIterator[tuple[ReadStream, WriteStream]]:
    """Serve MCP over stdio: the SDK's `stdio_server` contract (the same streams, explicit text streams skip the
    claim of fd 0 and 1), with every request line answered (see the module docstring)."""
    with ExitStack() as claims:
        if stdin is None:
            source = _file_lines(claims.enter_context(_claimed(0, lambda: os.open(os.devnull, os.O_RDONLY), "rb")))
        else:
            source = _text_lines(stdin)
        sink = stdout or _BinarySink(claims.enter_context(_claimed(1, lambda: os.dup(2), "wb")))
        async with _serving(source, sink) as streams:
            yield streams


async def _file_lines(wire_in: BinaryIO) -> AsyncIterator[bytes | Overlong | str]:
    async def read() -> bytes:
        # abandon_on_cancel: a read blocked on an idle pipe must not hold up the end of the transport.
        return await anyio.to_thread.run_sync(wire_in.read1, CHUNK_BYTES, abandon_on_cancel=True)  # type: ignore[attr-defined]

    async for line in bounded_lines(read):
        yield line


class _BinarySink:
    def __init__(self, wire_out: BinaryIO) -> None:
        self._out = wire_out

    async def write(self, text: str) -> None:
        await anyio.to_thread.run_sync(self._out.write, text.encode("utf-8"))

    async def flush(self) -> None:
        await anyio.to_thread.run_sync(self._out.flush)


@asynccontextmanager
async def _serving(
    source: AsyncIterable[bytes | Overlong | str], sink: TextSink
) -> AsyncIterator[tuple[ReadStream, WriteStream]]:
    read_stream_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_stream_reader = anyio.create_memory_object_stream[SessionMessage](0)
    writing = anyio.Lock()

    async def emit(message: JSONRPCMessage) -> None:
        try:
            line = write_message(message)
        except Exception:
            logger.exception("stdio: an answer could not be serialized")
            if not isinstance(message, JSONRPCResponse | JSONRPCError):
                return
            line = write_message(
                _error(message.id, INTERNAL_ERROR, "Internal error: the answer could not be serialized")
            )
        async with writing:
            await sink.write(line + "\n")
            await sink.flush()

    async def stdin_reader() -> None:
        async with read_stream_writer:
            async for line in source:
                if isinstance(line, Overlong):
                    logger.warning("stdio: answered a line longer than %d bytes", MAX_LINE_BYTES)
                    limit = f"{MAX_LINE_BYTES // 2**20} MiB"
                    await emit(_error(None, INVALID_REQUEST, f"Invalid Request: a line is longer than {limit}"))
                    continue
                text = line.decode("utf-8", "replace") if isinstance(line, bytes) else line
                message = read_message(text)
                if isinstance(message, RefusedLine):
                    await emit(message.answer)
                elif message is not None:
                    await read_stream_writer.send(SessionMessage(message))

    async def stdout_writer() -> None:
        async with write_stream_reader:
            async for session_message in write_stream_reader:
                await emit(session_message.message)

    reading = anyio.CancelScope()

    async def read_until_done() -> None:
        with reading:
            try:
                await stdin_reader()
            except anyio.ClosedResourceError:
                await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(read_until_done)
        tasks.start_soon(stdout_writer)
        try:
            yield read_stream, write_stream
        finally:
            reading.cancel()
            await write_stream.aclose()


async def run_stdio(server: MCPServer) -> None:
    """What `MCPServer.run_stdio_async` does, on this transport."""
    lowlevel = server._lowlevel_server  # MCPServer has no public accessor; run_stdio_async uses the same attribute
    async with stdio_server() as (read_stream, write_stream):
        await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())
