"""``ctxbench proxy``: an HTTP front end over :mod:`ctxbench.service.proxy_service` (aiohttp)."""
