"""Symbol cards: snippet and excerpt limits, and secrets masked before anything reaches a card."""
from __future__ import annotations

import dataclasses

from codegraph_helpers import MULTI, small_config
from ctxbench.codegraph.index import parse_file
from ctxbench.redaction import MASK, mask_secrets, redact


def cards_of(path: str, config=None):
    config = config or small_config()
    parsed = parse_file((MULTI / path).read_text(), path, "python", config)
    return {c.symbol_id: c for c in parsed.cards}


def test_card_fields_and_limits():
    cards = cards_of("pkg/core.py")
    tick = cards["pkg.core.Engine.tick"]
    assert tick.signature == "def tick(self, count: int) -> int"
    assert tick.snippet.splitlines()[0] == "total = self.plugin.run(self)"  # body, dedented
    assert len(tick.snippet.splitlines()) <= small_config().snippet_lines
    assert tick.excerpt.splitlines()[0] == "def tick(self, count: int) -> int:"
    assert len(tick.excerpt.splitlines()) <= small_config().excerpt_lines
    engine = cards["pkg.core.Engine"]
    assert engine.snippet.splitlines()[0] == "speed: int = 3"  # after the docstring
    assert "Runs plugins." in engine.render()
    assert engine.excerpt in engine.render(with_excerpt=True)
    module = cards["pkg.core"]
    assert "classes: Base, Plugin, Engine" in module.snippet


def test_limits_follow_config():
    config = dataclasses.replace(small_config(), snippet_lines=2, excerpt_lines=3)
    for card in cards_of("pkg/core.py", config).values():
        assert len(card.snippet.splitlines()) <= 2
        assert len(card.excerpt.splitlines()) <= 3


def test_card_with_api_key_is_redacted():
    cards = cards_of("pkg/settings.py")
    headers = cards["pkg.settings.client_headers"]
    assert headers.redacted
    assert "ghp_" not in headers.snippet + headers.excerpt
    assert MASK in headers.snippet
    module = cards["pkg.settings"]
    assert module.redacted and "sk-proj" not in module.excerpt
    harmless = cards["pkg.settings.harmless"]
    assert not harmless.redacted
    assert "[secrets redacted]" in headers.render()


def test_secret_patterns():
    samples = [
        'key = "AKIAABCDEFGHIJKLMNOP"',
        'token = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"',
        "OPENAI = 'sk-proj-abcdefghijklmnopqrstuvwxyz012345'",
        "slack = 'xoxb-1234567890-abcdefghij'",
        'password: str = "hunter2hunter2hunter2"',
        '{"api_key": "abcd1234efgh5678ijkl"}',
        "google = 'AIzaSyA1234567890abcdefghijklmnopqrstuv'",
    ]
    for sample in samples:
        masked, hit = redact(sample)
        assert hit, sample
        assert MASK in masked
    for clean in ('name = "a_long_identifier_name_here"', 'TOKEN = "[a-zA-Z_][a-zA-Z0-9_-]*"', "x = 1",
                  'sk = "sk-short"'):
        assert redact(clean) == (clean, False), clean


def test_private_key_block_keeps_lines_and_syntax():
    src = 'KEY = """\n-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAabcdefghijklmnopqrstuvwxyz012345\n-----END RSA PRIVATE KEY-----\n"""\n'
    masked, lines = mask_secrets(src)
    assert masked.count("\n") == src.count("\n")
    assert "MIIEow" not in masked
    assert lines == frozenset({2, 3, 4})
    compile(masked, "k.py", "exec")
