"""Pure ASGI middlewares that screen requests before routing, and the security headers.

Each guard answers by itself, before any byte of the body is read (issue 18), save the
body limit, which may only find out while reading:

- `HostOriginMiddleware`: 400 for a Host header the service does not answer to (DNS
  rebinding against a service on a laptop), 403 for a cross-site state-changing
  request (a page elsewhere posting forms or `no-cors` fetches: CSRF).
- `ApiKeyMiddleware`: 401/403 on /v1 without a valid X-API-Key, so an unauthenticated
  client cannot make the service read, parse or store a body.
- `MethodsMiddleware`: OPTIONS answered with the path's methods, and a correct `Allow`
  on every 405.
- `UploadLimitMiddleware`: 413 for a body over its limit (CXR_MAX_UPLOAD_MB,
  CXR_MAX_BATCH_UPLOAD_MB or CXR_MAX_JSON_MB), from Content-Length or while reading.
- `SecurityHeadersMiddleware`: nosniff, no referrer, no framing, `no-store` on /v1, and
  a restrictive Content-Security-Policy on HTML pages that set none of their own.
- `DemoHeaderMiddleware`: `X-CXR-Demo-Model: true` while a demo checkpoint is loaded.

The rules and their settings are described in docs/security/http.md.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import re
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from starlette.datastructures import MutableHeaders
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.errors import PayloadTooLarge
from app.media_types import is_json, media_type
from app.route_table import RouteTable, app_path
from app.security import ApiKeys
from app.settings import Settings

if TYPE_CHECKING:
    from fastapi import FastAPI

    from app.deps import AppState

__all__ = [
    "API_PREFIX",
    "ApiKeyMiddleware",
    "DemoHeaderMiddleware",
    "HostOriginMiddleware",
    "MethodsMiddleware",
    "SecurityHeadersMiddleware",
    "UploadLimitMiddleware",
    "allowed_hosts",
    "docs_csp",
]

log = logging.getLogger(__name__)


API_PREFIX = "/v1"
LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")
_WILDCARD_BINDS = frozenset({"", "0.0.0.0", "::"})  # noqa: S104 - names, not a bind
_STATE_CHANGING = frozenset({b"POST", b"PUT", b"PATCH", b"DELETE"})
_DEFAULT_PORTS = {"http": "80", "https": "443"}

# HTML pages without a policy of their own (none today besides / and the docs, which set
# theirs): nothing runs, nothing loads, nothing frames them.
HTML_CSP = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"


def _is_api(scope: Scope) -> bool:
    path = app_path(scope)
    return path == API_PREFIX or path.startswith(API_PREFIX + "/")


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope.get("headers") or ():
        if key == name:
            return bytes(value)
    return None


def _refusal(status: int, error: str, detail: str) -> JSONResponse:
    return JSONResponse({"detail": detail, "error": error}, status_code=status)


def _bare_host(name: str) -> str:
    """A configured host name as compared: lower case, no brackets, no trailing dot."""
    name = name.strip().lower()
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    return name.rstrip(".")


def _host_of(authority: str) -> str:
    """The host name of a Host header or URL authority (`name:port`, `[v6]:port`)."""
    authority = authority.strip().lower()
    if authority.startswith("["):
        end = authority.find("]")
        return authority[1:end] if end > 0 else ""
    return authority.partition(":")[0].rstrip(".")


def _authority(authority: str, scheme: str) -> str:
    """`host[:port]` lower case, without the scheme's default port."""
    authority = authority.strip().lower()
    default = _DEFAULT_PORTS.get(scheme)
    if default and authority.endswith(":" + default):
        authority = authority[: -len(default) - 1]
    return authority


def allowed_hosts(settings: Settings) -> frozenset[str] | None:
    """The Host names served, or None for any.

    Without API keys: localhost, 127.0.0.1, ::1, CXR_HOST and CXR_ALLOWED_HOSTS. With
    keys, any Host unless CXR_ALLOWED_HOSTS is set (then the same list). `*` in
    CXR_ALLOWED_HOSTS accepts any Host.
    """
    extra = [_bare_host(name) for name in settings.allowed_hosts]
    if "*" in extra or (settings.api_keys and not extra):
        return None
    names = {*LOCAL_HOSTS, *extra}
    if settings.host not in _WILDCARD_BINDS:
        names.add(_bare_host(settings.host))
    return frozenset(names)


class HostOriginMiddleware:
    """400 for a Host not served; 403 for a cross-site POST, PUT, PATCH or DELETE.

    A state-changing request is cross-site when it says `Sec-Fetch-Site: cross-site`, or
    carries an `Origin` whose host and port differ from the Host header's (`Origin: null`,
    sent by sandboxed frames and local files, included; a reverse proxy must pass the
    Host header on). A request without Origin (curl, scripts, other servers) is not a
    browser's cross-site request and passes.
    """

    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self.app = app
        self.hosts = allowed_hosts(settings)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        raw_host = _header(scope, b"host")
        host = raw_host.decode("latin-1") if raw_host is not None else None
        if self.hosts is not None and host is not None and _host_of(host) not in self.hosts:
            log.warning("refused a request for a host not in CXR_ALLOWED_HOSTS (400)")
            refusal = _refusal(
                400,
                "InvalidHost",
                "the Host header names a host this service does not answer to; add the name "
                "clients use to CXR_ALLOWED_HOSTS",
            )
            await refusal(scope, receive, send)
            return
        if scope.get("method", "").encode("latin-1") in _STATE_CHANGING and self._cross_site(
            scope, host
        ):
            log.warning("refused a cross-site %s request (403)", scope.get("method"))
            refusal = _refusal(
                403,
                "CrossSiteRequest",
                "cross-site request refused: the Origin (or Sec-Fetch-Site) shows that a page "
                "of another site sent it; call the API from this service's own origin",
            )
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _cross_site(self, scope: Scope, host: str | None) -> bool:
        if _header(scope, b"sec-fetch-site") == b"cross-site":
            return True
        raw_origin = _header(scope, b"origin")
        if raw_origin is None:
            return False
        try:
            origin = urlsplit(raw_origin.decode("latin-1").strip())
        except ValueError:  # a malformed authority, e.g. an unclosed IPv6 bracket
            return True
        if origin.scheme not in _DEFAULT_PORTS or not origin.netloc or host is None:
            return True  # `null`, file:, data:, or nonsense
        return _authority(origin.netloc, origin.scheme) != _authority(host, origin.scheme)


class ApiKeyMiddleware:
    """401 (no X-API-Key) or 403 (wrong key) on /v1 when keys are configured, before the
    body is read. The routes keep `require_api_key` too: it documents the key in OpenAPI
    and checks again whatever path reaches them."""

    def __init__(self, app: ASGIApp, keys: ApiKeys) -> None:
        self.app = app
        self.keys = keys

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.keys.enabled and _is_api(scope):
            key = _header(scope, b"x-api-key")
            if not key:
                await _refusal(401, "Unauthorized", "missing X-API-Key header")(
                    scope, receive, send
                )
                return
            if not self.keys.check(key.decode("latin-1")):
                await _refusal(403, "Forbidden", "invalid API key")(scope, receive, send)
                return
        await self.app(scope, receive, send)


class MethodsMiddleware:
    """OPTIONS: 204 with `Allow` listing every method the path takes (404 for no path).
    HEAD where the path takes GET: the GET answer's status and headers, without its body
    (RFC 9110 9.3.2; FastAPI routes list GET alone, and health checkers send HEAD). `Allow`
    keeps to the methods the OpenAPI schema documents.
    405: `Allow` rewritten to the same list (Starlette names only the first route's)."""

    def __init__(self, app: ASGIApp, routes: RouteTable) -> None:
        self.app = app
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        found = self.routes.match(scope)
        if found.template is None or found.methods is None:  # no such path, or a mount
            await self.app(scope, receive, send)
            return
        allow = found.allow_header()
        if scope.get("method") == "OPTIONS" and "OPTIONS" not in found.methods:
            await Response(status_code=204, headers={"Allow": allow})(scope, receive, send)
            return

        head = scope.get("method") == "HEAD" and "HEAD" not in found.methods
        if head and "GET" in found.methods:
            scope = {**scope, "method": "GET"}
        else:
            head = False

        async def send_allow(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] == 405:
                MutableHeaders(scope=message)["Allow"] = allow
            if head and message["type"] == "http.response.body":
                message = {**message, "body": b""}  # Content-Length stays the GET's
            await send(message)

        await self.app(scope, receive, send_allow)


class SecurityHeadersMiddleware:
    """Headers on every answer, refusals included.

    Everywhere: `X-Content-Type-Options: nosniff`, `Referrer-Policy: no-referrer`,
    `X-Frame-Options: DENY`. On /v1: `Cache-Control: no-store` (results hold UIDs and
    accession numbers). On HTML: `HTML_CSP` unless the page set its own policy.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        api = _is_api(scope)

        async def send_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers.setdefault("X-Content-Type-Options", "nosniff")
                headers.setdefault("Referrer-Policy", "no-referrer")
                headers.setdefault("X-Frame-Options", "DENY")
                if api:
                    headers["Cache-Control"] = "no-store"
                if media_type(headers.get("content-type")) == "text/html":
                    headers.setdefault("Content-Security-Policy", HTML_CSP)
            await send(message)

        await self.app(scope, receive, send_headers)


class UploadLimitMiddleware:
    """Answer 413 for bodies over the limit: early from Content-Length, else while reading.

    File uploads have the large limits: an image to POST /v1/images/predict
    (CXR_MAX_UPLOAD_MB) and a multipart zip to POST /v1/batches (CXR_MAX_BATCH_UPLOAD_MB).
    Every other body, JSON above all, has CXR_MAX_JSON_MB (issue 18 item 6: a 1 GiB JSON
    batch request was read, parsed and echoed back).
    """

    # The operations that take files, and the content types they take them as.
    _FILES = {
        "/v1/images/predict": ("upload", None),  # raw (any type but JSON) or multipart
        "/v1/batches": ("batch", "multipart/form-data"),
        "/v1/studies/ask": ("upload", "multipart/form-data"),  # an image with the questions
    }

    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self.app = app
        self.limits = {
            "upload": (int(settings.max_upload_mb * 2**20), "CXR_MAX_UPLOAD_MB"),
            "batch": (int(settings.max_batch_upload_mb * 2**20), "CXR_MAX_BATCH_UPLOAD_MB"),
            "json": (int(settings.max_json_mb * 2**20), "CXR_MAX_JSON_MB"),
        }

    def _limit(self, scope: Scope) -> tuple[int, str]:
        kind, wanted = self._FILES.get(app_path(scope), ("json", None))
        content_type = media_type(dict(scope.get("headers") or []).get(b"content-type"))
        if is_json(content_type) or (wanted is not None and content_type != wanted):
            kind = "json"
        return self.limits[kind]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit, setting = self._limit(scope)
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > limit:
            response = _refusal(
                413,
                "PayloadTooLarge",
                f"request body is {int(length) / 2**20:.1f} MiB; the limit is "
                f"{limit / 2**20:g} MiB ({setting})",
            )
            await response(scope, receive, send)
            return
        received = 0

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    # An HTTPException is re-raised by FastAPI's body parsing (not turned
                    # into a 400), so it reaches the handlers as a 413.
                    raise PayloadTooLarge(
                        f"request body exceeds the limit of {limit / 2**20:g} MiB ({setting})"
                    )
            return message

        await self.app(scope, limited_receive, send)


class DemoHeaderMiddleware:
    """Mark every response `X-CXR-Demo-Model: true` while a demo checkpoint is loaded."""

    def __init__(self, app: ASGIApp, fastapi_app: FastAPI) -> None:
        self.app = app
        self.fastapi_app = fastapi_app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        state: AppState | None = getattr(self.fastapi_app.state, "cxr", None)
        demo = (
            state is not None
            and state.predictor is not None
            and bool(state.predictor.card.get("demo", False))
        )
        if scope["type"] != "http" or not demo:
            await self.app(scope, receive, send)
            return

        async def send_wrapper(message: Message) -> None:
            if message["type"] == "http.response.start":
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"], (b"x-cxr-demo-model", b"true")]
            await send(message)

        await self.app(scope, receive, send_wrapper)


_INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.DOTALL)


def docs_csp(html: str) -> str:
    """The policy for a Swagger UI or ReDoc page: its own inline scripts by hash.

    The scripts, styles and images come from this origin (/docs/assets); the inline
    script that starts Swagger UI is allowed by its SHA-256, so no other inline script
    runs. Styles may be inline (both UIs set them from script); ReDoc's search runs in a
    worker made from a blob.
    """
    hashes = " ".join(
        "'sha256-" + base64.b64encode(hashlib.sha256(s.encode("utf-8")).digest()).decode() + "'"
        for s in _INLINE_SCRIPT.findall(html)
    )
    return (
        f"default-src 'none'; script-src 'self' {hashes}".rstrip()
        + "; style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; "
        "connect-src 'self'; worker-src blob:; frame-ancestors 'none'; base-uri 'none'; "
        "form-action 'self'"
    )
