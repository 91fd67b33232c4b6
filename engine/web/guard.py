"""What keeps the console to the person it was started for: a token on every request, a CSRF
token on every form, and headers that let a page run only the console's own files.

The token is random per start and printed with the URL (``http://127.0.0.1:PORT/?token=...``,
as Jupyter does). The first request carries it in the query; the console answers with a cookie
(``HttpOnly``, ``SameSite=Strict``, named after the token, so consoles on other ports keep
theirs) and sends the browser to the same page without the token, so that it does not stay in
the address bar or the history. Every later request shows the cookie, or the token as
``Authorization: Bearer TOKEN`` (a program). Anything else gets a 403 that says where the URL
was printed. A form's CSRF token is derived from the token: another site cannot read it, so it
cannot post a form the console accepts.

Every response carries a strict Content-Security-Policy (scripts, styles and connections from
the console itself only, no inline script, no frames), ``X-Content-Type-Options: nosniff``
and ``Referrer-Policy: no-referrer``.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, urlencode

__all__ = ["CSP", "Guard", "csrf_token"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
       "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")

HEADERS = [(b"content-security-policy", CSP.encode()),
           (b"x-content-type-options", b"nosniff"),
           (b"referrer-policy", b"no-referrer"),
           (b"x-frame-options", b"DENY"),
           (b"cache-control", b"no-store")]


def csrf_token(token: str) -> str:
    """The CSRF token of the console whose token is ``token``."""
    return hmac.new(token.encode(), b"toolledger web console: csrf", hashlib.sha256).hexdigest()


def cookie_name(token: str) -> str:
    return "toolledger_console_" + hashlib.sha256(token.encode()).hexdigest()[:12]


class Guard:
    """The ASGI middleware that enforces the token and adds the headers (see the module
    docstring)."""

    def __init__(self, app: App, token: str) -> None:
        if len(token) < 16:
            raise ValueError("the console's token must be at least 16 characters (a random "
                             "one: secrets.token_urlsafe())")
        self.app = app
        self.token = token
        self.cookie = cookie_name(token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *HEADERS]
            await send(message)

        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"),
                          keep_blank_values=True)
        given = [value for key, value in query if key == "token"]
        if given:
            if not self._same(given[0]):
                await _respond(secured, 403, "This token is not this console's: open the URL "
                                             "toolledger web printed when it started.")
                return
            rest = urlencode([(k, v) for k, v in query if k != "token"])
            root = scope.get("root_path", "")
            path = scope["path"] if scope["path"].startswith(root) else root + scope["path"]
            where = path + (f"?{rest}" if rest else "")
            root = root or "/"
            await _respond(secured, 303, "", [
                (b"location", where.encode("utf-8", "surrogatepass")),
                (b"set-cookie", f"{self.cookie}={self.token}; Path={root}; HttpOnly; "
                                f"SameSite=Strict".encode())])
            return
        if not self._allowed(scope):
            await _respond(secured, 403, "This console needs its token: open the URL "
                                         "toolledger web printed when it started "
                                         "(http://HOST:PORT/?token=...).")
            return
        await self.app(scope, receive, secured)

    def _same(self, token: str) -> bool:
        return hmac.compare_digest(token.encode("utf-8", "surrogatepass"), self.token.encode())

    def _allowed(self, scope: Scope) -> bool:
        for name, value in scope.get("headers", []):
            if name == b"authorization":
                kind, _, token = value.decode("latin-1").partition(" ")
                if kind.lower() == "bearer" and self._same(token.strip()):
                    return True
            elif name == b"cookie":
                cookies: SimpleCookie = SimpleCookie()
                try:
                    cookies.load(value.decode("latin-1"))
                except Exception:  # a cookie header some other site set badly
                    continue
                morsel = cookies.get(self.cookie)
                if morsel is not None and self._same(morsel.value):
                    return True
        return False


async def _respond(send: Send, status: int, body: str,
                   headers: list[tuple[bytes, bytes]] | None = None) -> None:
    data = body.encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(data)).encode()), *(headers or [])]})
    await send({"type": "http.response.body", "body": data})
