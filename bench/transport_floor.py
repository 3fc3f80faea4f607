"""The transport floor: what answering size-prefixed frames costs with no broker on top.

A bare uvloop BufferedProtocol reads ``int32 size`` framed requests into one receive buffer,
copies each whole frame out (as a server must, to keep it past the read) and answers it with a
fixed 20-byte frame, the responses of one read leaving in one write. Frames larger than the
buffer are counted off as they arrive, not kept. ``bench/broker.py`` sends it the very frames
it sends the broker, so every cell of its sweep shows how far the broker is above this floor.

Run as a script it serves on a free port of 127.0.0.1 and prints ``serving on 127.0.0.1:PORT``
on stderr (the line the bench waits for, as from a broker).
"""

from __future__ import annotations

import asyncio
import sys

import uvloop

RECEIVE_BUFFER_BYTES = 64 * 1024
ANSWER_BYTES = 16


class FloorProtocol(asyncio.BufferedProtocol):
    """Answers every frame with ``ANSWER_BYTES`` of the frame's start, behind a size prefix."""

    def __init__(self) -> None:
        self._buffer = bytearray(RECEIVE_BUFFER_BYTES)
        self._view = memoryview(self._buffer)
        self._end = 0  # the bytes not framed yet are _buffer[:_end]
        self._skipping = 0  # bytes still to come of a frame larger than the buffer
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._view[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        end = self._end + nbytes
        answers = []
        start = 0
        if self._skipping:
            skipped = min(self._skipping, end)
            self._skipping -= skipped
            if self._skipping == 0:
                answers.append(_answer(b""))
            start = skipped
        while end - start >= 4 and not self._skipping:
            size = int.from_bytes(self._buffer[start : start + 4], "big")
            if end - start - 4 >= size:
                frame = bytes(self._view[start + 4 : start + 4 + size])
                answers.append(_answer(frame))
                start += 4 + size
            elif 4 + size > RECEIVE_BUFFER_BYTES:  # count it off as it arrives
                self._skipping = 4 + size - (end - start)
                start = end
            else:
                break
        if start:
            self._buffer[: end - start] = self._buffer[start:end]
        self._end = end - start
        if answers:
            self._transport.writelines(answers)


def _answer(frame: bytes) -> bytes:
    return ANSWER_BYTES.to_bytes(4, "big") + frame[:ANSWER_BYTES].ljust(ANSWER_BYTES, b"\0")


async def serve() -> None:
    server = await asyncio.get_running_loop().create_server(FloorProtocol, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    print(f"serving on 127.0.0.1:{port}", file=sys.stderr, flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    uvloop.run(serve())
