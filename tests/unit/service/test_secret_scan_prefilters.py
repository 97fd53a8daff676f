"""The secret scan's cheap prefilters find exactly what the whole-text patterns find: the same lines for the keyword
detector, the same ``.env`` values, so masking (and every card built from masked source) is unchanged. Compared
with the plain patterns run over the whole text, on real source and on made-up and fuzzed lines."""
from __future__ import annotations

import dataclasses
import importlib.util
import random
import re
from pathlib import Path

import pytest

from ctxbench.redaction import mask_text, rules, scanner

MADE_UP = [
    "SECRET_TOKEN=abcdefgh12\nexport API_KEY='zzzz1111yyyy'\n  PASSWORD=\"p4ssw0rd!x\"  \nx=1=SECRET_A=12345678\n",
    "no_newline_at_end_TOKEN=abcdef123456", "=\n==\nA=\nTOKEN=short\n",
    'password = "hunter2hunter2"\n', 'db_password: s3cr3t-value-1\n', "API_KEY=abcd1234efgh5678\n",
    "export AWS_SECRET=wJalrXUtnFEMI/K7MDENG\n", "  TOKEN='ghp_abcdefghijklmnopqrstuvwxyz0123456789'\n",
    "contraseña = 'x9y8z7w6v5'\n", "ContraseNa: 'Zz12345678'\n", "key_pass=1234567890ab\n", "PWD=/home/user1234\n",
    "privateKey := \"MIIEvQIBADANBgkqhkiG9w0BAQEFAASC\"\n", "foo(bar=baz, secret_key='A1b2C3d4E5f6G7h8')\n",
    "x=1\ny==2\nname=\"value#1234567\"\n", "İstanbul password='Abc123456789'\n", "a.b_c=12345678\n",
    "no secrets here, just words about keys and passes\n", "aaaaaaaaaaaa1 bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb2\n",
    "https://user:pa55word@example.com/path\n", "clientkey secretkey pwdpwd\n", "=start\n\n=\n",
    "TOKEN =abcdef12345\n  =TOKENabcdef123\nexport\tAPI_TOKEN=abcdef123456\nx.TOKEN=abcdef123456 \n",
    """'abc'def'ghi' "a"'b'"c" '''' """ + '"""" \'\\\\\' "x\'y" \'deadbeefcafe0123\'"deadbeefcafe0123"\'',
    "k = 'c3VwZXJzZWNyZXRwYXNzd29yZDEyMzQ1Ng=='\nh = \"9f86d081884c7d659a2feaa0c55ad015\"\n",
    "'QWxhZGRpbjpvcGVuIHNlc2FtZSBwbGVhc2Uh'QWxhZGRpbjpvcGVuIHNlc2FtZSBwbGVhc2Uh'\"ab\"cd\"",
    "x1 = 'abcdefghijklmnop'\nabcdefghijk1 = 2\nabcdefghijklmn\u0663 7\n1\n\nlong_identifier_here = 0 # 12345\n9abcdefghijkl",
]


def _source_texts(limit: int = 120) -> list[str]:
    spec = importlib.util.find_spec("textual")
    if spec is None or not spec.submodule_search_locations:
        return []
    root = Path(list(spec.submodule_search_locations)[0])
    return [p.read_text(encoding="utf-8", errors="replace") for p in sorted(root.rglob("*.py"))[:limit]]


def _fuzz_texts(n: int = 300) -> list[str]:
    rng = random.Random(7)
    alphabet = "abcdefghijklmnopqrstuvwxyzABCKPSW0123456789_-=+/.:'\"# \t\n" + "İñ"
    words = ["key", "pass", "pwd", "secret", "contraseña", "api_key", "export ", "password", "=", "\n", "db_pass",
             "KEY", "Secret", "AKIA", "sk-", "ghp_"]
    out = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(1, 40)):
            if rng.random() < 0.3:
                parts.append(rng.choice(words))
            else:
                parts.append("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 30))))
        out.append("".join(parts))
    return out


TEXTS = MADE_UP + ["".join(MADE_UP)] + _fuzz_texts() + _source_texts()


def _plain_keyword_line_starts(text: str) -> list[int]:
    lowered = text.lower()
    if len(lowered) == len(text):
        hits = scanner._KEYWORD_HINT_LOWER.finditer(lowered)
    else:
        hits = scanner._KEYWORD_HINT.finditer(text)
    return sorted({text.rfind("\n", 0, m.start()) + 1 for m in hits})


def _plain_env_spans(text: str) -> list[tuple[int, int]]:
    return [m.span("s") for m in rules._ENV_LINE.finditer(text)
            if rules._ENV_SECRET_NAME.search(m.group("name")) and rules.looks_like_a_value(m.group("s"))]


@pytest.mark.parametrize("i", range(len(TEXTS)))
def test_the_env_values_found_line_by_line_are_the_ones_the_whole_text_pattern_finds(i):
    text = TEXTS[i]
    assert list(rules._env_spans(text)) == _plain_env_spans(text)


def _plain_assignment_spans(text: str) -> list[tuple[int, int]]:
    out = []
    for match in rules._ASSIGNED_VALUE.finditer(text):
        value = match.group("s")
        if not (any(c.isdigit() for c in value) and any(c.isalpha() for c in value)):
            continue
        line_start = text.rfind("\n", 0, match.start()) + 1
        if rules._SECRET_KEY_NAME.search(text[max(line_start, match.start() - rules._KEY_NAME_LOOKBACK):match.start()]):
            out.append(match.span("s"))
    return out


@pytest.mark.parametrize("i", range(len(TEXTS)))
def test_the_secret_assignments_of_texts_holding_a_long_quoted_value_are_the_ones_the_whole_text_pattern_finds(i):
    text = TEXTS[i]
    assert list(rules._assignment_spans(text)) == _plain_assignment_spans(text)


def test_a_secret_assignment_is_still_found_and_a_text_without_a_long_quoted_value_is_not_scanned():
    assert list(rules._assignment_spans('api_key = "abcd1234efgh5678ijkl"\n')) == [(11, 31)]
    assert list(rules._assignment_spans("api_key = 'abcd1234efgh5678ijkl'\n")) == [(11, 31)]
    assert list(rules._assignment_spans("api_key = 'abcd1234 efgh5678ijkl'\n")) == []


def _plain_quoted_strings(text: str) -> list[tuple[float, tuple[int, int]]]:
    return sorted((plugin.entropy_limit, m.span(2)) for plugin in scanner._detectors().entropy
                  for m in plugin.regex.finditer(text))


def _quoted_strings(text: str) -> list[tuple[float, tuple[int, int]]]:
    d = scanner._detectors()
    return sorted((plugin.entropy_limit, m.span(group)) for plugin, (patterns, group) in zip(d.entropy, d.quoted)
                  for pattern in patterns for m in pattern.finditer(text))


def test_each_entropy_plugin_is_scanned_quote_by_quote():
    d = scanner._detectors()
    assert d.entropy and all(len(patterns) == 2 and group == 1 for patterns, group in d.quoted)


@pytest.mark.parametrize("i", range(len(TEXTS)))
def test_the_quoted_strings_found_quote_by_quote_are_the_ones_each_entropy_plugins_pattern_finds(i):
    text = TEXTS[i]
    assert _quoted_strings(text) == _plain_quoted_strings(text)


def test_the_entropy_rule_masks_what_the_plugins_own_pattern_finds():
    text = "".join(MADE_UP)
    d = scanner._detectors()
    plain = dataclasses.replace(d, quoted=tuple(((plugin.regex,), 2) for plugin in d.entropy))
    spans = sorted(scanner._entropy_spans(text, d))
    assert len(spans) >= 2 and spans == sorted(scanner._entropy_spans(text, plain))


@pytest.mark.parametrize("i", range(len(TEXTS)))
def test_the_keyword_lines_found_by_word_are_the_lines_the_whole_text_pattern_finds(i):
    text = TEXTS[i]
    assert scanner._keyword_line_starts(text) == _plain_keyword_line_starts(text)


def test_the_made_up_secrets_are_still_masked():
    masked = mask_text("".join(MADE_UP), "settings.py")
    for secret in ("hunter2hunter2", "abcd1234efgh5678", "ghp_abcdefghijklmnopqrstuvwxyz0123456789", "A1b2C3d4E5f6G7h8",
                   "pa55word"):
        assert secret not in masked.text
    assert masked.count >= 5


# provider secrets without a digit in them: a random 20-letter token has none about 3% of the time
DIGIT_FREE_SECRETS = [
    "token = glpat-abcdefghijklmnopqrstuv\n",
    "GITHUB_TOKEN=ghp_abcdefghijklmnopqrstuvwxyzABCDEFGHIJ\n",
    "auth = 'eyJhbGciOiJIUzIi.eyJzdWIiOiJhYmMifQ.abcdefXYZ'\n",
    "key: AKCpabcdefghijkl\n",
    "x = APAbcdefghijk\n",
    "stripe = sk_live_abcdefghijklmnopqrstuvwx\n",
    "mail = SG.abcdefghijklmnopqrstuv.abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQ\n",
    "bot = Mabcdefghijklmnopqrstuvw.abcdef.abcdefghijklmnopqrstuvwxyzA\n",
    "slack = xoxb-1-a\n",
    "telegram = 12345678:abcdefghijklmnopqrstuvwxyzABCDEFGHI\n",
    'ibm_api_key = "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqr"\n',
    'cloudant_password = "abcdefghijklmnopqrstuvwx"\n',
    "twilio = ACabcdefghijklmnopqrstuvwxyzabcdef\n",
    "aws = AKIAABCDEFGHIJKLMNOP\n",
]


def _whole_text_regex_spans(text: str) -> set[tuple[int, int]]:
    spans = set()
    for pattern in (rule.pattern for rule in scanner._detectors().rules):
        for match in pattern.finditer(text):
            if match.re.groups:
                spans.update(match.span(n) for n in range(1, match.re.groups + 1) if match.group(n))
            else:
                spans.add(match.span())
    return spans


@pytest.mark.parametrize("i", range(len(TEXTS) + 2))
def test_the_regex_detectors_mask_everything_their_patterns_find_in_the_whole_text(i):
    text = (TEXTS + ["".join(DIGIT_FREE_SECRETS), "\n".join(t + "ordinary = line" for t in DIGIT_FREE_SECRETS)])[i]
    found = {i for a, b in scanner._regex_spans(text, scanner._detectors()) for i in range(a, b)}
    # a pattern's leading or trailing \s may take the newline around a line; the secret's characters are what count
    needed = {i for a, b in _whole_text_regex_spans(text) for i in range(a, b) if not text[i].isspace()}
    assert needed <= found


@pytest.mark.parametrize("secret", DIGIT_FREE_SECRETS)
def test_a_provider_secret_without_a_digit_is_masked(secret):
    assert _whole_text_regex_spans(secret), "the detector's own pattern finds it"
    assert scanner.MASK in mask_text("def f():\n    pass\n" + secret, "settings.py").text


def test_the_folds_to_ascii_letters_are_every_character_re_matches_to_one_case_insensitively():
    beyond = "".join(map(chr, range(0x80, 0x110000)))
    found = {}
    for match in re.finditer("[a-z]", beyond, re.IGNORECASE):
        ch = match.group()
        found[ord(ch)] = next(c for c in "abcdefghijklmnopqrstuvwxyz"
                              if re.fullmatch(c, ch, re.IGNORECASE))
    assert scanner.ASCII_FOLDS == found


@pytest.mark.parametrize("secret", ['paſsword = "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqr"\n',
                                    'ibm_api_Key = "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqr" # é\n',
                                    "İ xoxb-1-a\n"])
def test_a_case_insensitive_rule_finds_its_words_in_a_text_beyond_ascii(secret):
    text = "# naïve\n" + secret
    needed = {i for a, b in _whole_text_regex_spans(text) for i in range(a, b) if not text[i].isspace()}
    assert needed, "the detector's own pattern finds it"
    assert needed <= {i for a, b in scanner._regex_spans(text, scanner._detectors()) for i in range(a, b)}
