"""How fast uvicorn's HTTP protocols receive an upload: h11, httptools and `cxr serve`'s own.

A bare ASGI app that reads a request body and answers its length, served in this process
by uvicorn on loopback with each protocol in turn; one client thread posts a body of
--mib MiB, one request at a time, --n times after --warmup. Prints per protocol the
median time from the app's first `receive()` to the last body chunk (what the service's
`upload` timing measures, less hashing and spooling) and the client's median request
time. `guarded` is `app.server.guarded_protocol`, what `cxr serve` runs (httptools with a
request-head deadline, a head size limit and a connection cap).

    python benchmarks/http_receive.py
    python benchmarks/http_receive.py --mib 50 --n 10 --rounds 3
"""

from __future__ import annotations

import argparse
import http.client
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

from bench_kit import free_port

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def measure(protocol: str, body: bytes, n: int, warmup: int) -> tuple[float, float]:
    """(median server receive s, median client request s) for one protocol."""
    import uvicorn

    from app.server import guarded_protocol

    received: list[float] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()  # lifespan.startup, then lifespan.shutdown
                await send({"type": message["type"] + ".complete"})
                if message["type"] == "lifespan.shutdown":
                    return
        start, size = time.perf_counter(), 0
        while True:
            message = await receive()
            size += len(message.get("body", b""))
            if not message.get("more_body"):
                break
        received.append(time.perf_counter() - start)
        answer = str(size).encode()
        headers = [(b"content-length", str(len(answer)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": answer})

    protocol_class: Any = protocol
    if protocol == "guarded":
        protocol_class = guarded_protocol(header_timeout_s=10.0, max_connections=64)
    port = free_port()
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, http=protocol_class, log_level="warning"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    client: list[float] = []
    try:
        for i in range(warmup + n):
            conn = http_client(port)
            t0 = time.perf_counter()
            conn.request("POST", "/", body=body, headers={"Content-Type": "application/dicom"})
            answer = conn.getresponse().read()
            conn.close()
            if int(answer) != len(body):
                raise RuntimeError(f"{protocol}: the app received {answer!r} bytes")
            if i >= warmup:
                client.append(time.perf_counter() - t0)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
    return statistics.median(received[warmup:]), statistics.median(client)


def http_client(port: int) -> http.client.HTTPConnection:
    return http.client.HTTPConnection("127.0.0.1", port, timeout=60)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawTextHelpFormatter)  # fmt: skip
    parser.add_argument("--mib", type=float, default=10.0, help="body size (default 10 MiB)")
    parser.add_argument("--n", type=int, default=20, help="requests per protocol")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=2, help="protocols interleaved this often")
    args = parser.parse_args()
    body = os.urandom(int(args.mib * 2**20))
    sys.stdout.write(
        f"{args.mib:g} MiB bodies, one at a time over loopback, {args.n} requests after "
        f"{args.warmup} of warm-up, medians in ms (server: first receive to last chunk)\n"
    )
    for round_ in range(args.rounds):
        for protocol in ("h11", "httptools", "guarded"):
            server_s, client_s = measure(protocol, body, args.n, args.warmup)
            sys.stdout.write(
                f"  round {round_ + 1} {protocol:9s} server {server_s * 1e3:6.1f}  "
                f"client {client_s * 1e3:6.1f}\n"
            )
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
