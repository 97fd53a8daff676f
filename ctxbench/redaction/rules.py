"""The rules detect-secrets lacks: private key bodies, AWS secret access keys beside their key id,
provider tokens it does not know, secret-named assignments and ``.env`` lines.

Each token pattern is gated by cheap substring hints, so a text without any hint costs a few ``in``
checks.
"""
from __future__ import annotations

import re
from typing import Iterator

_BOUNDARY = re.compile(r"[A-Za-z0-9_]")

# (hints, pattern, needs a word boundary before it); the whole match is masked
_TOKEN_PATTERNS: tuple[tuple[tuple[str, ...], re.Pattern[str], bool], ...] = tuple(
    (hints, re.compile(pattern), boundary)
    for hints, pattern, boundary in (
        (("AKIA", "ASIA", "AGPA", "AIDA", "AROA"), r"(?:AKIA|ASIA|AGPA|AIDA|AROA)[0-9A-Z]{16}(?![0-9A-Z])", True),
        (("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), r"gh[pousr]_[A-Za-z0-9]{30,}", True),
        (("github_pat_",), r"github_pat_[A-Za-z0-9_]{22,}", True),
        (("sk-",), r"sk-(?:proj-|ant-|live-|svcacct-)?[A-Za-z0-9_-]{20,}", True),
        (("xox",), r"xox[abposr]-[A-Za-z0-9-]{10,}", True),
        (("hooks.slack.com",), r"https://hooks\.slack\.com/services/[A-Za-z0-9/_-]{20,}", False),
        (("AIza",), r"AIza[0-9A-Za-z_-]{35}", True),
        (("_live_", "_test_"), r"(?:sk|rk|pk)_(?:live|test)_[0-9A-Za-z]{16,}", True),
        (("eyJ",), r"eyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}", True),
    )
)

# an AWS access key id; a 40-character secret access key within AWS_PAIR_LINES lines of one is masked
_AWS_KEY_ID = re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}(?![0-9A-Z])")
_AWS_SECRET = re.compile(r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")
AWS_PAIR_LINES = 3

# generic assignments: a long quoted value after = / : / =>, whose key name says it is a secret
_VALUE_CHARS = r"[A-Za-z0-9_\-+/=.~!@#%&:]"
_ASSIGNED_VALUE = re.compile(r"(?:=|:|=>)\s*[bru]{0,2}(['\"])(?P<s>" + _VALUE_CHARS + r"{16,})\1")
_QUOTED_VALUE_SINGLE = re.compile("'" + _VALUE_CHARS + "{16}")
_QUOTED_VALUE_DOUBLE = re.compile('"' + _VALUE_CHARS + "{16}")
_SECRET_KEY_NAME = re.compile(
    r"(?:api[_-]?key|apikey|secret|token|passw(?:or)?d|access[_-]?key|auth[_-]?key|private[_-]?key|credential)"
    r"[A-Za-z0-9_]*['\"]?\s*(?::\s*[A-Za-z_][\w\[\]., |]*)?\s*$",
    re.IGNORECASE,
)
_KEY_NAME_LOOKBACK = 80

# a .env / shell line: NAME=value (unquoted or quoted) whose NAME says it is a secret
_ENV_LINE = re.compile(
    r"^[ \t]*(?:export[ \t]+)?(?P<name>[A-Za-z_][A-Za-z0-9_.]*)=(?P<q>['\"]?)(?P<s>[^\s'\"#]{8,})(?P=q)[ \t]*$",
    re.MULTILINE,
)
_ENV_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.")  # the name's last
_ENV_SECRET_NAME = re.compile(r"secret|token|passw|pwd|api_?key|access_?key|private_?key|credential|auth",
                              re.IGNORECASE)

_PRIVATE_BEGIN = re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----")
_PRIVATE_END = re.compile(r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----")
_KEY_BODY = re.compile(r"[A-Za-z0-9+/=]{16,}")
_CODE_VALUE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*(?:\(.*\))?[,;)]*$")


def looks_like_a_value(value: str) -> bool:
    """A value after a secret keyword that is data, not code: ``password = get_password()`` or
    ``secret: settings.SECRET`` name where a secret comes from; a secret has a digit or a symbol."""
    if _CODE_VALUE.match(value) and not any(c.isdigit() for c in value):
        return False
    return True


def _token_spans(text: str) -> Iterator[tuple[int, int]]:
    for hints, pattern, boundary in _TOKEN_PATTERNS:
        if not any(h in text for h in hints):
            continue
        for match in pattern.finditer(text):
            start = match.start()
            if boundary and start and _BOUNDARY.match(text[start - 1]):
                continue
            yield start, match.end()


def _aws_secret_spans(text: str) -> Iterator[tuple[int, int]]:
    if "AKIA" not in text and "ASIA" not in text:
        return
    ids = [text.count("\n", 0, m.start()) for m in _AWS_KEY_ID.finditer(text)]
    if not ids:
        return
    for match in _AWS_SECRET.finditer(text):
        value = match.group()
        if not (any(c.isdigit() for c in value) or "/" in value or "+" in value):
            continue
        if not (any(c.islower() for c in value) and any(c.isupper() for c in value)):
            continue
        line = text.count("\n", 0, match.start())
        if any(abs(line - n) <= AWS_PAIR_LINES for n in ids):
            yield match.span()


def _assignment_spans(text: str) -> Iterator[tuple[int, int]]:
    # every match holds a quote and 16 value characters: a text without them (two thirds of textual's files) is not
    # scanned (each gate starts with a literal, which the engine seeks at C speed; the pattern starts with none)
    if _QUOTED_VALUE_SINGLE.search(text) is None and _QUOTED_VALUE_DOUBLE.search(text) is None:
        return
    for match in _ASSIGNED_VALUE.finditer(text):
        value = match.group("s")
        if not (any(c.isdigit() for c in value) and any(c.isalpha() for c in value)):
            continue
        line_start = text.rfind("\n", 0, match.start()) + 1
        before = text[max(line_start, match.start() - _KEY_NAME_LOOKBACK):match.start()]
        if _SECRET_KEY_NAME.search(before):
            yield match.span("s")


def _env_spans(text: str) -> Iterator[tuple[int, int]]:
    """The values of the secret-named ``NAME=value`` lines. Only the lines holding a ``=`` are tried, each from its
    start (a match is one whole line), found by a string search instead of the pattern tried at every character."""
    at = text.find("=")
    while at >= 0:
        start = text.rfind("\n", 0, at) + 1
        end = text.find("\n", at)
        # the line's first '=' ends its name: a line whose first '=' follows no name character (``x = 1``) is no
        # NAME=value line, and the pattern is not tried on it
        match = _ENV_LINE.match(text, start) if at > start and text[at - 1] in _ENV_NAME_CHARS else None
        if match and _ENV_SECRET_NAME.search(match.group("name")) and looks_like_a_value(match.group("s")):
            yield match.span("s")
        if end < 0:
            return
        at = text.find("=", end)


def extra_spans(text: str) -> list[tuple[int, int]]:
    """Spans of the secrets our own rules find."""
    return [*_token_spans(text), *_aws_secret_spans(text), *_assignment_spans(text), *_env_spans(text)]


def mask_private_keys(text: str, mask: str) -> tuple[str, set[int]]:
    """Mask the body of every private key block (the armour lines stay); returns the text and its masked lines."""
    lines = text.split("\n")
    masked: set[int] = set()
    in_key = False
    for i, line in enumerate(lines):
        begin = _PRIVATE_BEGIN.search(line)
        if not (in_key or begin):
            continue
        start = begin.end() if begin else 0
        end_match = _PRIVATE_END.search(line, start)
        stop = end_match.start() if end_match else len(line)
        lines[i] = line[:start] + _KEY_BODY.sub(mask, line[start:stop]) + line[stop:]
        masked.add(i + 1)
        in_key = end_match is None
    return "\n".join(lines), masked


def count_key_blocks(text: str) -> int:
    return len(_PRIVATE_BEGIN.findall(text))
