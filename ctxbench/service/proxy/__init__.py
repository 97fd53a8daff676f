"""The proxy's domain, in one place: what a proxied request is, how it is steered, and what is recorded.

- :mod:`.wire` — reading the bodies the proxy forwards, one module per wire format (:mod:`.wire_chat`,
  :mod:`.wire_anthropic`, :mod:`.wire_responses`, :mod:`.wire_gemini`, over :mod:`.wire_parts`), with
  :mod:`.scaffolding` and :mod:`.anatomy` telling the assistant's scaffolding apart from the user's words,
  :mod:`.recognition` what a message is recognised by, :mod:`.wire_bytes` every byte accounted for;
  :mod:`.edits` writes an edited body, :mod:`.neutral` the store's view of a message, :mod:`.cache_view` the
  prompt cache's;
- :mod:`.plan` — a proxied request as a ContextPlan, and steering (drops, pins, mode) applied to it;
- :mod:`.service` — :class:`~.service.ProxyService`: a request in, the body to forward out, the exchange
  recorded (:mod:`.body` keeps what may be recorded of a body, :mod:`.masking` masks secrets in what is
  stored, :mod:`.reply` reads the reply as it streams past);
- :mod:`.session` — a proxied conversation opened in the workbench (``ctxbench open --watch``);
- :mod:`.pricing`, :mod:`.calibration`, :mod:`.steer_cost`, :mod:`.findings`, :mod:`.policy` — what a
  request and a steer cost, counts that match the bill, waste flagged as it happens, and one policy across
  clients.

The HTTP front end is :mod:`ctxbench.proxy`; it and the other front ends import the modules here directly
(this package re-exports nothing, so importing one module does not import the rest).
"""
