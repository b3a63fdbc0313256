"""The fake clouds: Bedrock, Vertex AI and Azure OpenAI as the gateway's upstream, in agent mode.

``python -m tests.fakes.clouds`` serves as its own process and prints its port
once it listens. Every model call must carry the gateway's own credential, or
it is answered 403 as the cloud would:

- Bedrock: a SigV4 signature (service ``bedrock``, region ``us-east-1``) made
  with ``ACCESS_KEY`` / ``SECRET_KEY``, checked by recomputing it with
  botocore over the request as it arrived; ``invoke-with-response-stream``
  answers in AWS event-stream frames (each a ``chunk`` of one Messages event,
  the last with ``amazon-bedrock-invocationMetrics``), ``invoke`` as JSON;
  ``GET /inference-profiles`` lists none.
- Vertex AI: ``Authorization: Bearer <the token POST /token issued>`` (the fake
  is also the credential file's token server; each token lives
  ``FAKE_CLOUDS_TOKEN_SECONDS``, default 3600); Messages answers as SSE.
- Azure: ``api-key: AZURE_KEY``; Responses and Chat Completions answers as
  JSON or SSE (Chat Completions with a usage chunk only when ``stream_options``
  asks for it).

Answers are the scripted agent's (``tests.fakes.agent_mode``); ``GET
/_control/calls`` lists them with their usage, ``GET /_control/auth`` counts
the signatures verified and refused, ``GET /_control/last`` the last model
call's path, headers and body as they arrived, ``GET /_control/endpoints`` the requests
by method and endpoint.
"""

import binascii
import json
import os
import struct
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from tests.fakes import agent_mode

ACCESS_KEY = "AKIDLEDGERTEST000000"
SECRET_KEY = "ledger-test-secret-key-0000000000000000"  # noqa: S105 - a test credential
REGION = "us-east-1"
DEPLOYMENTS = {"prod-gpt5": "gpt-5"}
AZURE_KEY = "azure-test-key"
BEDROCK_API_KEY = "bedrock-api-key-test"
TOKEN = "ya29.ledger-test-token"  # noqa: S105 - a test credential
_lock = threading.Lock()
auth = {"verified": 0, "refused": 0, "tokens_issued": 0}
# The last model call as it arrived: its path and body (what the gateway wrote into it).
last: dict[str, Any] = {}
# Requests by method and endpoint (the model id left out), in the order first seen.
endpoints: dict[str, int] = {}


def _endpoint(method: str, path: str) -> str:
    """``POST invoke-with-response-stream``, ``GET /inference-profiles?type=…``, …"""
    if path.startswith("/model/"):
        return f"{method} {path.rsplit('/', 1)[1]}"
    if ":" in path.rsplit("/", 1)[-1]:
        return f"{method} :{path.rsplit(':', 1)[1]}"
    return f"{method} {path.rsplit('/', 1)[-1] if path.startswith('/openai/') else path}"


def _header(name: str, value: str) -> bytes:
    raw_name, raw_value = name.encode(), value.encode()
    return (
        bytes([len(raw_name)]) + raw_name + b"\x07" + struct.pack(">H", len(raw_value)) + raw_value
    )


def frame(headers: dict[str, str], payload: bytes) -> bytes:
    """One AWS event-stream message (the test's own encoder; botocore only decodes)."""
    encoded = b"".join(_header(name, value) for name, value in headers.items())
    total = 12 + len(encoded) + len(payload) + 4
    prelude = struct.pack(">II", total, len(encoded))
    prelude += struct.pack(">I", binascii.crc32(prelude))
    body = prelude + encoded + payload
    return body + struct.pack(">I", binascii.crc32(body))


def chunk_frame(event: dict[str, Any]) -> bytes:
    """An invoke stream's ``chunk`` event holding one Messages event."""
    payload = json.dumps(
        {"bytes": binascii.b2a_base64(json.dumps(event).encode(), newline=False).decode()}
    )
    return frame(
        {":event-type": "chunk", ":content-type": "application/json", ":message-type": "event"},
        payload.encode(),
    )


def exception_frame(kind: str, message: str) -> bytes:
    """A stream's ``exception`` frame, as Bedrock reports a failure mid-stream."""
    return frame(
        {
            ":exception-type": kind,
            ":content-type": "application/json",
            ":message-type": "exception",
        },
        json.dumps({"message": message}).encode(),
    )


def bedrock_frames(events: list[str], usage: dict[str, int]) -> bytes:
    """The SSE events of a Messages stream as Bedrock's frames, metrics on the last."""
    out = []
    for text in events:
        data = json.loads(text.split("data: ", 1)[1])
        if data.get("type") == "message_stop":
            data["amazon-bedrock-invocationMetrics"] = {
                "inputTokenCount": usage["input_tokens"], "outputTokenCount": usage["output_tokens"],
                "invocationLatency": 100, "firstByteLatency": 10,
            }  # fmt: skip
        out.append(chunk_frame(data))
    return b"".join(out)


def signature_ok(method: str, host: str, path: str, headers: dict[str, str], body: bytes) -> bool:
    """Whether the request's SigV4 signature is the one ``SECRET_KEY`` makes (botocore)."""
    given = headers.get("authorization", "")
    if not given.startswith("AWS4-HMAC-SHA256 "):
        return False
    fields = dict(
        part.strip().split("=", 1) for part in given[len("AWS4-HMAC-SHA256 ") :].split(",")
    )
    signed = fields.get("SignedHeaders", "").split(";")
    request = AWSRequest(
        method=method, url=f"http://{host}{path}", data=body,
        headers={name: headers[name] for name in signed if name in headers},
    )  # fmt: skip
    request.context["timestamp"] = headers.get("x-amz-date", "")
    signer = SigV4Auth(Credentials(ACCESS_KEY, SECRET_KEY), "bedrock", REGION)
    canonical = signer.canonical_request(request)
    expected = signer.signature(signer.string_to_sign(request, canonical), request)
    scope = f"{ACCESS_KEY}/{headers.get('x-amz-date', '')[:8]}/{REGION}/bedrock/aws4_request"
    return fields.get("Credential") == scope and fields.get("Signature") == expected


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # The headers and the body go in separate writes: without TCP_NODELAY each
    # answer on a kept-alive connection waits ~40 ms for a delayed ACK.
    disable_nagle_algorithm = True

    def log_message(self, *_args: Any) -> None:
        pass

    def _headers(self) -> dict[str, str]:
        return {name.lower(): value for name, value in self.headers.items()}

    def _send(
        self, status: int, content_type: str, body: bytes, extra: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, document: Any, extra: dict[str, str] | None = None) -> None:
        self._send(status, "application/json", json.dumps(document).encode(), extra)

    def do_GET(self) -> None:
        if self.path == "/_control/calls":
            self._json(200, {"calls": list(agent_mode.calls)})
        elif self.path == "/_control/auth":
            self._json(200, dict(auth))
        elif self.path == "/_control/last":
            self._json(200, dict(last))
        elif self.path == "/_control/endpoints":
            self._json(200, dict(endpoints))
        elif self.path.startswith(("/inference-profiles", "/foundation-models")):
            if self._authorised("bedrock", b""):
                self._json(200, {"inferenceProfileSummaries": []})
        else:
            self._json(404, {"message": f"no {self.path}"})

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        path = self.path.split("?", 1)[0]
        if path == "/token":
            with _lock:
                auth["tokens_issued"] += 1
            lifetime = int(os.environ.get("FAKE_CLOUDS_TOKEN_SECONDS", "3600"))
            self._json(200, {"access_token": TOKEN, "expires_in": lifetime, "token_type": "Bearer"})
            return
        cloud = (
            "bedrock"
            if path.startswith("/model/")
            else "azure"
            if path.startswith("/openai/")
            else "vertex"
        )
        if not self._authorised(cloud, body):
            return
        request = json.loads(body)
        with _lock:
            last.clear()
            last.update({"path": self.path, "body": request, "headers": list(self.headers.items())})
        if cloud == "azure" and path.endswith("/chat/completions"):
            named = path.split("/")[3] if "/deployments/" in path else str(request.get("model"))
            self._chat(path, DEPLOYMENTS.get(named, named), request)
            return
        if cloud == "azure":
            # Azure answers with the model its deployment serves, not the deployment's name.
            named = path.split("/")[3] if "/deployments/" in path else str(request.get("model"))
            model = DEPLOYMENTS.get(named, named)
            document, events = agent_mode.responses(f"/azure{path}", {**request, "model": model})
            if document is not None:
                self._json(200, document)
            else:
                self._sse(events)
            return
        if cloud == "vertex":
            model = path.rsplit("/models/", 1)[1].split(":")[0]
        else:
            model = unquote(path.split("/")[2])
        if model == "count-tokens" or path.endswith("/count-tokens"):
            with _lock:
                auth["counted"] = auth.get("counted", 0) + 1
            self._json(200, {"inputTokens": 7} if cloud == "bedrock" else {"input_tokens": 7})
            return
        if cloud == "vertex" and "/publishers/google/" in path:
            document, events = agent_mode.gemini(f"/vertex{path}", request)
            if document is not None:
                self._json(200, document)
            elif "alt=sse" not in self.path:  # a stream without alt=sse: one JSON array
                self._json(200, [json.loads(text.split("data: ", 1)[1]) for text in events])
            else:
                self._sse(events)
            return
        if cloud == "bedrock" and "/converse" in path:
            self._converse(path, model, request)
            return
        streamed = path.endswith(("invoke-with-response-stream", ":streamRawPredict"))
        document, events = agent_mode.anthropic(
            f"/{cloud}{path}", {**request, "model": model, "stream": streamed}
        )
        if not streamed:
            self._json(200, document)
        elif cloud == "vertex":
            self._sse(events)
        else:
            usage = agent_mode.calls[-1]["usage"]
            self._send(200, "application/vnd.amazon.eventstream", bedrock_frames(events, usage))

    def _converse(self, path: str, model: str, request: dict[str, Any]) -> None:
        """A Converse answer: JSON, or frames ending in ``metadata`` with the usage."""
        number = len(agent_mode.calls) + 1
        usage = {"inputTokens": 1200 + number, "outputTokens": 300 + number, "totalTokens": 0}
        usage["totalTokens"] = usage["inputTokens"] + usage["outputTokens"]
        agent_mode.calls.append({
            "path": f"/bedrock{path}", "model": model, "id": None, "usage": usage,
            "max_tokens": request.get("inferenceConfig", {}).get("maxTokens"),
        })  # fmt: skip
        message = {"role": "assistant", "content": [{"text": "Workspace check"}]}
        if not path.endswith("converse-stream"):
            document = {"output": {"message": message}, "stopReason": "end_turn",
                        "usage": usage, "metrics": {"latencyMs": 5}}  # fmt: skip
            self._json(200, document)
            return
        events = [
            ("messageStart", {"role": "assistant"}),
            ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Workspace check"}}),
            ("contentBlockStop", {"contentBlockIndex": 0}),
            ("messageStop", {"stopReason": "end_turn"}),
            ("metadata", {"usage": usage, "metrics": {"latencyMs": 5}}),
        ]
        frames = b"".join(
            frame({":event-type": name, ":content-type": "application/json",
                   ":message-type": "event"}, json.dumps(data).encode())
            for name, data in events
        )  # fmt: skip
        self._send(200, "application/vnd.amazon.eventstream", frames)

    def _chat(self, path: str, model: str, request: dict[str, Any]) -> None:
        """A Chat Completions answer: JSON, or chunks with a usage chunk only if asked for."""
        number = len(agent_mode.calls) + 1
        usage = {"prompt_tokens": 900 + number, "completion_tokens": 200 + number}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        answer_id = f"chatcmpl-cloud{number:06d}"
        agent_mode.calls.append({"path": f"/azure{path}", "model": model, "id": answer_id,
                                 "usage": usage})  # fmt: skip
        message = {"role": "assistant", "content": "Workspace check"}
        base = {"id": answer_id, "object": "chat.completion", "created": 1, "model": model}
        if not request.get("stream"):
            choice = {"index": 0, "message": message, "finish_reason": "stop"}
            self._json(200, {**base, "choices": [choice], "usage": usage})
            return
        chunk = {**base, "object": "chat.completion.chunk"}
        delta = {"index": 0, "delta": message, "finish_reason": "stop"}
        chunks = [{**chunk, "choices": [delta]}]
        if (request.get("stream_options") or {}).get("include_usage"):
            chunks.append({**chunk, "choices": [], "usage": usage})
        self._sse([f"data: {json.dumps(c)}\n\n" for c in chunks] + ["data: [DONE]\n\n"])

    def _sse(self, events: list[str]) -> None:
        self._send(200, "text/event-stream", "".join(events).encode())

    def _authorised(self, cloud: str, body: bytes) -> bool:
        headers = self._headers()
        with _lock:
            name = _endpoint(self.command, self.path)
            endpoints[name] = endpoints.get(name, 0) + 1
        if any("lk_" in value for value in headers.values()):
            ok = False  # a gateway key must never reach a cloud
        elif cloud == "bedrock" and headers.get("authorization", "").startswith("Bearer "):
            ok = headers["authorization"] == f"Bearer {BEDROCK_API_KEY}"
        elif cloud == "bedrock":
            ok = signature_ok(self.command, headers.get("host", ""), self.path, headers, body)
        elif cloud == "vertex":
            ok = headers.get("authorization") == f"Bearer {TOKEN}"
        else:
            ok = headers.get("api-key") == AZURE_KEY and "authorization" not in headers
        with _lock:
            auth["verified" if ok else "refused"] += 1
        if not ok:
            self._json(403, {"message": "The request signature we calculated does not match"},
                       {"x-amzn-ErrorType": "InvalidSignatureException"})  # fmt: skip
        return ok


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    sys.stdout.write(f"{server.server_address[1]}\n")
    sys.stdout.flush()
    server.serve_forever()


if __name__ == "__main__":
    main()
