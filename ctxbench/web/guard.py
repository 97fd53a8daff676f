"""Who may reach the served workbench: requests addressed to its own loopback port, from its own page, with the
token of this launch.

A web page the user visits can make their browser send requests to 127.0.0.1; a DNS-rebinding page can even
make them same-origin under a foreign name. So every request must name this server in ``Host`` (127.0.0.1,
localhost or [::1] with its port), an ``Origin``, when sent, must be one of those, and the page and its
websocket carry the random token printed at launch (compared in constant time).
"""
from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")  # the names a browser on this machine uses for loopback
TOKEN_BYTES = 32  # random bytes of a launch token (43 URL-safe characters)


def new_token() -> str:
    """A fresh launch token (URL-safe)."""
    return secrets.token_urlsafe(TOKEN_BYTES)


@dataclass(frozen=True)
class LoopbackGuard:
    """The checks for a server on ``port`` of the loopback interface launched with ``token``."""

    port: int
    token: str

    @property
    def hosts(self) -> frozenset[str]:
        """Every ``Host`` value that names this server (lower case)."""
        names = {f"{name}:{self.port}" for name in LOOPBACK_NAMES}
        if self.port == 80:  # a browser leaves the default port out
            names |= set(LOOPBACK_NAMES)
        return frozenset(names)

    @property
    def origins(self) -> frozenset[str]:
        """Every ``Origin`` value of a page this server served."""
        return frozenset(f"http://{host}" for host in self.hosts)

    def host_ok(self, host: str | None) -> bool:
        """Whether a request's ``Host`` names this server (a missing one does not)."""
        return host is not None and host.strip().lower() in self.hosts

    def origin_ok(self, origin: str | None) -> bool:
        """Whether ``origin`` is one of this server's own pages (a missing or ``null`` one is not)."""
        return origin is not None and origin.strip().lower().rstrip("/") in self.origins

    def token_ok(self, given: str | None) -> bool:
        """Whether ``given`` is this launch's token, compared in constant time."""
        return given is not None and hmac.compare_digest(given.encode("utf-8"), self.token.encode("utf-8"))

    @property
    def url(self) -> str:
        """The address to open: the page with the token."""
        return f"http://127.0.0.1:{self.port}/?token={self.token}"
