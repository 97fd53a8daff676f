"""Who may use the proxy: a request is checked before anything is forwarded or recorded.

- **Host**: a loopback name (``127.0.0.1``, ``localhost``, ``[::1]``) or the address the proxy listens on,
  with the proxy's port. A web page that rebinds its own name to 127.0.0.1 sends its own name: refused
  (DNS rebinding). A proxy listening on every address (``0.0.0.0``) cannot know its names and takes any.
- **Origin**: assistants are not browsers and send none; a web page's request carries its page's origin
  (``null`` for a sandboxed one) and is refused unless it is the proxy's own loopback origin. A page's
  ``text/plain`` POST (sent without a preflight) is stopped here, before it reaches the upstream.
- **Token** (``--token``, ``proxy.token``): when set, every request carries it, in the
  ``X-Ctxbench-Token`` header or as the first segment of the base URL (``http://127.0.0.1:PORT/t/TOKEN/v1``);
  either is taken off before the request goes upstream, and neither is stored or logged.
- **Content type**: only an ``application/json`` body is recorded; any other is forwarded unrecorded
  (:func:`recordable`).
"""
from __future__ import annotations

import hmac
from dataclasses import dataclass
from functools import cached_property
from urllib.parse import urlsplit

TOKEN_HEADER = "X-Ctxbench-Token"
TOKEN_PREFIX = "/t/"
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
WILDCARD_HOSTS = ("0.0.0.0", "::", "")
JSON_TYPE = "application/json"


@dataclass(frozen=True)
class Refusal:
    status: int
    message: str


@dataclass(frozen=True)
class Admitted:
    path: str  # the request's path without the token segment
    path_qs: str  # the same with its query string


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


@dataclass(frozen=True)
class Guard:
    listen_host: str
    port: int
    token: str = ""

    @cached_property
    def hosts(self) -> frozenset[str]:
        """Every ``Host`` value that names this proxy (made once: the guard is checked on every request)."""
        names = {*LOOPBACK_NAMES, _bracketed(self.listen_host)}
        return frozenset(f"{name}:{self.port}" for name in names) | (
            frozenset(names) if self.port == 80 else frozenset())

    def check(self, host: str | None, origin: str | None, token_header: str | None, path: str,
              path_qs: str) -> Refusal | Admitted:
        if self.listen_host not in WILDCARD_HOSTS and (host or "").lower() not in self.hosts:
            return Refusal(403, f"ctxbench proxy: Host {host!r} is not this proxy's (use http://127.0.0.1:{self.port})")
        if origin is not None and not self._own_origin(origin):
            return Refusal(403, f"ctxbench proxy: requests from web pages are refused (Origin {origin!r})")
        if path.startswith(TOKEN_PREFIX):
            given, _, rest = path[len(TOKEN_PREFIX):].partition("/")
            path, path_qs = "/" + rest, "/" + path_qs[len(TOKEN_PREFIX) + len(given) + 1:]
        elif token_header is not None:
            given = token_header
        else:
            given = None
        if self.token and (given is None or not hmac.compare_digest(given.encode(), self.token.encode())):
            why = "no token" if given is None else "a wrong token"
            return Refusal(401, f"ctxbench proxy: {why}: send the proxy's token in the {TOKEN_HEADER} header "
                                f"or as the base URL's first segment (http://127.0.0.1:{self.port}/t/TOKEN/v1)")
        return Admitted(path, path_qs)

    def _own_origin(self, origin: str) -> bool:
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https"):
            # ``null`` (a sandboxed page, a file) is a web page; an app scheme (vscode-webview:, app:) is an
            # editor's own window, which no web page can claim
            return origin != "null" and bool(parts.scheme)
        return parts.netloc.lower() in self.hosts


def token_url(url: str, token: str) -> str:
    """The base URL that carries ``token`` as its first segment (``url`` itself when there is no token)."""
    return f"{url}{TOKEN_PREFIX}{token}" if token else url


def recordable(content_type: str) -> bool:
    """Whether a body of this media type is recorded (``application/json``; parameters aside)."""
    return content_type.split(";", 1)[0].strip().lower() == JSON_TYPE
