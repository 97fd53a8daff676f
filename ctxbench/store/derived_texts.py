"""Store component ``derived_texts``: what is derived from a text alone and never changes for that text, kept
per session so that reopening a long session does not compute it again.

* ``masked_texts`` — how a text was masked (``redaction.redact_cached``) under one rule set (``rules``: its
  fingerprint, ``redaction.rules_fingerprint``; a new rule set masks again): the number of secrets masked and
  the masked text when masking changed it (NULL: the text is unchanged). Only masked text is stored, never the
  text itself: the key is a 16-byte blake2b of it (``records.messages.text_key``).
* ``token_counts`` — a text's token count per tokenizer name (the house rule: counted once with the real
  encoder, remembered by content hash). The texts counted are those plans send (masked, rendered).

Rows are written in batches as they are first computed (``INSERT OR IGNORE``: a value for a key never changes)
and read in one query per table when a session is opened. They go with their session (foreign key).
"""
from __future__ import annotations

import json
import sqlite3
from typing import Any, Iterable, Iterator, Mapping

from ctxbench.records.messages import Message, text_key

COMPONENT = "derived_texts"
BATCH = 5000  # rows per executemany

_V1 = """
CREATE TABLE masked_texts (
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    rules      TEXT NOT NULL,
    key        BLOB NOT NULL,
    redactions INTEGER NOT NULL,
    masked     TEXT,
    PRIMARY KEY (session_id, rules, key)
) WITHOUT ROWID;
CREATE TABLE token_counts (
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    tokenizer  TEXT NOT NULL,
    key        BLOB NOT NULL,
    tokens     INTEGER NOT NULL,
    PRIMARY KEY (session_id, tokenizer, key)
) WITHOUT ROWID;
"""

MIGRATIONS = (_V1,)

Masking = tuple[str | None, int]  # (masked text, or None when masking left the text unchanged; secrets masked)


def masks(conn: sqlite3.Connection, session_id: str, rules: str) -> dict[bytes, Masking]:
    """Every masking kept for ``session_id`` under the rule set ``rules``, by text key."""
    rows = conn.execute("SELECT key, masked, redactions FROM masked_texts WHERE session_id = ? AND rules = ?",
                        (session_id, rules))
    return {bytes(r[0]): (r[1], int(r[2])) for r in rows}


def token_counts(conn: sqlite3.Connection, session_id: str, tokenizer: str) -> dict[bytes, int]:
    """Every token count kept for ``session_id`` with ``tokenizer``, by text key."""
    rows = conn.execute("SELECT key, tokens FROM token_counts WHERE session_id = ? AND tokenizer = ?",
                        (session_id, tokenizer))
    return {bytes(r[0]): int(r[1]) for r in rows}


def _batches(rows: Iterable[tuple[object, ...]]) -> Iterable[list[tuple[object, ...]]]:
    batch: list[tuple[object, ...]] = []
    for row in rows:
        batch.append(row)
        if len(batch) >= BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def save_masks(conn: sqlite3.Connection, session_id: str, rules: str, found: Mapping[bytes, Masking]) -> None:
    """Keep maskings (text key -> (masked text or None, secrets masked)) made under ``rules`` for ``session_id``."""
    for batch in _batches((session_id, rules, key, count, masked) for key, (masked, count) in found.items()):
        conn.executemany("INSERT OR IGNORE INTO masked_texts (session_id, rules, key, redactions, masked) "
                         "VALUES (?, ?, ?, ?, ?)", batch)


def save_token_counts(conn: sqlite3.Connection, session_id: str, tokenizer: str, counts: Mapping[bytes, int]) -> None:
    """Keep token counts (text key -> tokens with ``tokenizer``) for ``session_id``."""
    for batch in _batches((session_id, tokenizer, key, tokens) for key, tokens in counts.items()):
        conn.executemany(
            "INSERT OR IGNORE INTO token_counts (session_id, tokenizer, key, tokens) VALUES (?, ?, ?, ?)", batch)


def forget_session(conn: sqlite3.Connection, session_id: str) -> None:
    """Forget what is kept for ``session_id`` (its next plan masks and counts its history again)."""
    conn.execute("DELETE FROM masked_texts WHERE session_id = ?", (session_id,))
    conn.execute("DELETE FROM token_counts WHERE session_id = ?", (session_id,))


def forget_messages(conn: sqlite3.Connection, session_id: str, messages: Iterable[Message]) -> None:
    """Forget how the texts of deleted ``messages`` were masked: their contents, their tool calls' arguments and
    every string in those arguments (masked one by one). The masked text shows all but the secret, and the key is a
    hash of the original: a turn deleted to purge a secret leaves neither behind. (Token counts are of the masked,
    rendered texts; a text another message shares is masked again when next planned.)"""
    keys = {text_key(text) for m in messages for text in _texts(m) if text}
    if keys:
        conn.executemany("DELETE FROM masked_texts WHERE session_id = ? AND key = ?",
                         [(session_id, key) for key in keys])


def _texts(message: Message) -> Iterator[str]:
    yield message.content
    for call in message.tool_calls:
        yield call.arguments
        try:
            yield from _strings(json.loads(call.arguments))
        except ValueError:
            pass


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
