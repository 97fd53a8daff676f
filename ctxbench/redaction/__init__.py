"""Secret masking: tokens, keys and credentials are replaced by ``[REDACTED]`` before text reaches a card,
a stored transcript or a model call.

The rules are Yelp's detect-secrets plugins (every regex detector but public IPs, the high-entropy
string detectors at their default limits, the keyword detector) plus what detect-secrets lacks
(:mod:`.rules`): private key bodies, an AWS secret access key next to an access key id, provider tokens
it does not know (Google, ``sk-proj-`` keys, Stripe publishable keys ...), secret-named assignments and
``.env`` lines. Masking keeps the line structure (only the secret characters are replaced), so masked
source still parses and its line numbers still hold.

- :func:`mask_secrets` — the masked text and the 1-based lines that were masked (code indexing);
- :func:`redact` — the masked text and whether anything was masked;
- :func:`redact_count` — the masked text and how many secrets were masked (transcripts, plans);
- :func:`count_masks` — how many ``[REDACTED]`` marks a text holds (a plan item's ``redacted: N``).
"""
from __future__ import annotations

from ctxbench.redaction.scanner import (MASK, Masked, count_masks, forget_fresh_masks, forget_masks, load_rules,
                                        mask_text, redact_cached, redact_file_cached,
                                        remember_masks, rules_fingerprint, take_fresh_masks)

__all__ = ["MASK", "Masked", "count_masks", "forget_fresh_masks", "forget_masks", "load_rules", "mask_secrets",
           "mask_text", "redact", "redact_cached", "redact_file_cached", "redact_count", "remember_masks",
           "rules_fingerprint", "take_fresh_masks"]


def mask_secrets(text: str, filename: str = "") -> tuple[str, frozenset[int]]:
    """Mask every secret in ``text``; returns the masked text and the 1-based lines that were masked."""
    result = mask_text(text, filename)
    return result.text, result.lines


def redact(text: str, filename: str = "") -> tuple[str, bool]:
    """Mask secrets in a piece of text; returns (text, whether anything was masked)."""
    result = mask_text(text, filename)
    return result.text, result.count > 0


def redact_count(text: str, filename: str = "") -> tuple[str, int]:
    """Mask secrets in a piece of text; returns (text, how many secrets were masked)."""
    result = mask_text(text, filename)
    return result.text, result.count
