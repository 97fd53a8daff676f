"""The ``usage_billing`` component of the store: what a provider billed for a model call of the built-in chat,
beside its usage report (``usage_reports``: estimated vs reported prompt tokens).

- ``usage_billing``: per usage report, the reply tokens and, of the reported prompt, the tokens the provider said it
  read from its prompt cache and wrote to it (Anthropic ``cache_read_input_tokens`` /
  ``cache_creation_input_tokens``, OpenAI ``cached_tokens``), exactly as reported (NULL: not reported).

Rows go with their usage report (foreign key, ON DELETE CASCADE); ``store.plans`` writes and reads them.
"""
from __future__ import annotations

from ctxbench.store import db

COMPONENT = "usage_billing"

_V1 = """
CREATE TABLE usage_billing (
    usage_id    INTEGER PRIMARY KEY REFERENCES usage_reports(id) ON DELETE CASCADE,
    completion  INTEGER,
    cache_read  INTEGER,
    cache_write INTEGER
);
"""

MIGRATIONS: tuple[db.Migration, ...] = (_V1,)
