"""Secret patterns: tokens, keys and credentials are masked before anything reaches a card.

Masking keeps the line structure (and the code's syntax: only the secret characters are
replaced), so a masked source still parses and its line numbers still hold. Each pattern is
gated by cheap substring hints, so a file without any hint costs a few ``in`` checks.
"""
from __future__ import annotations

import re

MASK = "[REDACTED]"

_BOUNDARY = re.compile(r"[A-Za-z0-9_]")

# (name, hints, pattern, needs a word boundary before it); the group "s" (or the whole match) is masked
_TOKEN_PATTERNS: tuple[tuple[str, tuple[str, ...], re.Pattern[str], bool], ...] = tuple(
    (name, hints, re.compile(pattern), boundary)
    for name, hints, pattern, boundary in (
        ("aws_access_key", ("AKIA", "ASIA", "AGPA", "AIDA", "AROA"), r"(?:AKIA|ASIA|AGPA|AIDA|AROA)[0-9A-Z]{16}(?![0-9A-Z])", True),
        ("github_token", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), r"gh[pousr]_[A-Za-z0-9]{30,}", True),
        ("github_pat", ("github_pat_",), r"github_pat_[A-Za-z0-9_]{22,}", True),
        ("openai_key", ("sk-",), r"sk-(?:proj-|ant-|live-|svcacct-)?[A-Za-z0-9_-]{20,}", True),
        ("slack_token", ("xox",), r"xox[abposr]-[A-Za-z0-9-]{10,}", True),
        ("slack_webhook", ("hooks.slack.com",), r"https://hooks\.slack\.com/services/[A-Za-z0-9/_-]{20,}", False),
        ("google_api_key", ("AIza",), r"AIza[0-9A-Za-z_-]{35}", True),
        ("stripe_key", ("_live_", "_test_"), r"(?:sk|rk|pk)_(?:live|test)_[0-9A-Za-z]{16,}", True),
        ("jwt", ("eyJ",), r"eyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}", True),
    )
)

# generic assignments: a long quoted value after = / : / =>, whose key name says it is a secret
_ASSIGNED_VALUE = re.compile(r"(?:=|:|=>)\s*[bru]{0,2}(['\"])(?P<s>[A-Za-z0-9_\-+/=.~!@#%&:]{16,})\1")
_SECRET_KEY_NAME = re.compile(
    r"(?:api[_-]?key|apikey|secret|token|passw(?:or)?d|access[_-]?key|auth[_-]?key|private[_-]?key|credential)"
    r"[A-Za-z0-9_]*['\"]?\s*(?::\s*[A-Za-z_][\w\[\]., |]*)?\s*$",
    re.IGNORECASE,
)
_KEY_NAME_LOOKBACK = 80

_PRIVATE_BEGIN = re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----")
_PRIVATE_END = re.compile(r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----")
_KEY_BODY = re.compile(r"[A-Za-z0-9+/=]{16,}")


def mask_secrets(text: str) -> tuple[str, frozenset[int]]:
    """Mask every secret in ``text``; returns the masked text and the 1-based lines that were masked."""
    masked_lines: set[int] = set()
    if "PRIVATE KEY" in text:
        text = _mask_private_keys(text, masked_lines)
    spans: list[tuple[int, int]] = []
    for _name, hints, pattern, boundary in _TOKEN_PATTERNS:
        if not any(h in text for h in hints):
            continue
        for match in pattern.finditer(text):
            start = match.start()
            if boundary and start and _BOUNDARY.match(text[start - 1]):
                continue
            spans.append((start, match.end()))
    for match in _ASSIGNED_VALUE.finditer(text):
        value = match.group("s")
        if MASK in value or not (any(c.isdigit() for c in value) and any(c.isalpha() for c in value)):
            continue
        line_start = text.rfind("\n", 0, match.start()) + 1
        before = text[max(line_start, match.start() - _KEY_NAME_LOOKBACK):match.start()]
        if _SECRET_KEY_NAME.search(before):
            spans.append((match.start("s"), match.end("s")))
    if not spans:
        return text, frozenset(masked_lines)
    spans.sort()
    pieces: list[str] = []
    last = 0
    for start, end in spans:
        if start < last:  # overlapping matches: the first one already masked this region
            continue
        pieces.append(text[last:start])
        pieces.append(MASK)
        masked_lines.add(text.count("\n", 0, start) + 1)
        last = end
    pieces.append(text[last:])
    return "".join(pieces), frozenset(masked_lines)


def _mask_private_keys(text: str, masked_lines: set[int]) -> str:
    lines = text.split("\n")
    in_key = False
    for i, line in enumerate(lines):
        begin = _PRIVATE_BEGIN.search(line)
        if not (in_key or begin):
            continue
        start = begin.end() if begin else 0
        end_match = _PRIVATE_END.search(line, start)
        stop = end_match.start() if end_match else len(line)
        lines[i] = line[:start] + _KEY_BODY.sub(MASK, line[start:stop]) + line[stop:]
        masked_lines.add(i + 1)
        in_key = end_match is None
    return "\n".join(lines)


def redact(text: str) -> tuple[str, bool]:
    """Mask secrets in a piece of text; returns (text, whether anything was masked)."""
    masked, lines = mask_secrets(text)
    return masked, bool(lines)
