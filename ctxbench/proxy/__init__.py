"""``ctxbench proxy``: an HTTP front end over :mod:`ctxbench.service.proxy.service` (aiohttp)."""
