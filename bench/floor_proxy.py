"""The floor: a bare starlette + uvicorn + httpx pass-through, the gateway's web stack alone.

    python bench/floor_proxy.py UPSTREAM_URL

Prints ``listening on http://HOST:PORT`` once it listens. Every request is sent
on to the upstream as it came (hop-by-hop headers dropped) and the answer is
streamed back: what any proxy on this stack costs before it does any work of
its own. ``bench_gateway.py`` measures ``ledger proxy`` beside it in one run.
"""

import socket
import sys

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te",
     "trailer", "transfer-encoding", "upgrade", "host", "content-length"}
)  # fmt: skip


def build(upstream: str) -> Starlette:
    limits = httpx.Limits(max_connections=256, max_keepalive_connections=256)
    client = httpx.AsyncClient(base_url=upstream, timeout=600, limits=limits)

    async def forward(request: Request) -> StreamingResponse:
        body = await request.body()
        headers = [(k, v) for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP]
        outgoing = client.build_request(
            request.method, request.url.path, headers=headers, content=body,
            params=request.url.query or None,
        )  # fmt: skip
        response = await client.send(outgoing, stream=True)
        passed = {k: v for k, v in response.headers.items() if k.lower() not in HOP_BY_HOP}
        return StreamingResponse(
            response.aiter_raw(), status_code=response.status_code, headers=passed,
            background=BackgroundTask(response.aclose),
        )  # fmt: skip

    return Starlette(routes=[Route("/{path:path}", forward, methods=["GET", "POST"])])


def main() -> None:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(
        build(sys.argv[1]), log_level="warning", access_log=False, lifespan="off",
        server_header=False, timeout_keep_alive=75,
    )  # fmt: skip
    print(f"listening on http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
