#!/usr/bin/env python3
"""Opens N keep-alive connections to host:port, sends one request on each, reads the
answer, then holds every connection open (idle) until stdin closes or --hold seconds pass.

Prints "ready <open> <failed>" on stdout once all connections are established and answered,
so the caller can measure the server while they are held. Used by scripts/bench."""
import argparse
import asyncio
import sys


async def open_one(host, port, path, timeout):
    reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    await writer.drain()
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
    status = int(head.split(b" ", 2)[1])
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    if length:
        await asyncio.wait_for(reader.readexactly(length), timeout)
    if status != 200:
        raise RuntimeError(f"status {status}")
    return writer


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--path", default="/healthz")
    parser.add_argument("--connections", type=int, default=10000)
    parser.add_argument("--batch", type=int, default=250)
    parser.add_argument("--timeout", type=float, default=10)
    parser.add_argument("--hold", type=float, default=30, help="seconds to hold at most")
    args = parser.parse_args()

    writers, failed, first_error = [], 0, None
    for start in range(0, args.connections, args.batch):
        count = min(args.batch, args.connections - start)
        results = await asyncio.gather(
            *(open_one(args.host, args.port, args.path, args.timeout) for _ in range(count)),
            return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                failed += 1
                first_error = first_error or repr(result)
            else:
                writers.append(result)
    if first_error:
        print(f"first error: {first_error}", file=sys.stderr, flush=True)
    print(f"ready {len(writers)} {failed}", flush=True)

    # Hold until the caller closes our stdin (or the time limit passes).
    loop = asyncio.get_running_loop()
    try:
        await asyncio.wait_for(loop.run_in_executor(None, sys.stdin.read), args.hold)
    except asyncio.TimeoutError:
        pass
    # Check how many the server kept open before closing them.
    alive = sum(1 for w in writers if not w.transport.is_closing())
    print(f"alive {alive}", flush=True)
    for writer in writers:
        writer.close()


asyncio.run(main())
