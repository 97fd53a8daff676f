"""Where the secrets in a text are: detect-secrets' rule set run over the whole text, plus ours.

detect-secrets scans line by line through global settings; here its plugins are used directly (they
are plain regexes and an entropy check), each regex detector over the whole text at once, so a file
costs a few C-speed passes instead of a Python loop per line and plugin, and nothing is shared
between threads but compiled patterns. Its verification (which would call provider APIs) never runs.
"""
from __future__ import annotations

import re
import threading
from bisect import bisect_right
from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Iterator, Mapping

from ctxbench.records.derived import FreshValues
from ctxbench.records.messages import text_key
from ctxbench.redaction.literals import Necessary, necessary_literals
from ctxbench.redaction.rules import count_key_blocks, extra_spans, looks_like_a_value, mask_private_keys

MASK = "[REDACTED]"

# detect-secrets detectors left out: public IP addresses are not secrets, and its private-key rule only
# flags the BEGIN line (rules.private_key_spans masks the key's body and keeps the armour lines)
_SKIPPED_DETECTORS = frozenset({"IPPublicDetector", "PrivateKeyDetector"})
# the keyword detector runs on lines that hold one of its own keywords
_KEYWORD_HINT_PATTERN = (
    r"(?:api|auth|service|account|db|database|priv|private|client)_?key|(?:db|database|key)_?pass|password|passwd"
    r"|pwd|secret|contrase(?:ñ|n)a")
_KEYWORD_HINT = re.compile(_KEYWORD_HINT_PATTERN, re.IGNORECASE)
# the same words searched in lowered text: four times faster than re.IGNORECASE (which took a quarter of a cold
# index of textual's source), the positions the same whenever lowering keeps the text's length
_KEYWORD_HINT_LOWER = re.compile(_KEYWORD_HINT_PATTERN)
# every match of the hint pattern holds one of these words, so only the lines holding one are searched (a string
# search per word instead of the pattern tried at every character: a sixth of a cold index of textual's source)
_KEYWORD_HINT_WORDS = ("key", "pass", "pwd", "secret", "contrase")
# a regex detector whose matches hold a run of at least this many token characters is run on the lines holding one
# (found in one pass per text); shorter runs are too common in source to narrow anything
RUN_FILTER_MIN = 20
_TOKEN_RUN = re.compile(r"[A-Za-z0-9+/=_\-]{%d,}" % RUN_FILTER_MIN)  # literals.TOKEN_CHARACTERS, in an ASCII text
# elsewhere a superset: a case-insensitive class of them also matches letters such as U+212A (K) and \d other digits
_TOKEN_RUN_UNICODE = re.compile(r"[\w+/=\-]{%d,}" % RUN_FILTER_MIN)
_MIN_KEYWORD_VALUE = 6  # shorter values after a keyword (``password = "x"``) are placeholders, not secrets
MASKED_CACHE_SIZE = 50_000  # texts whose masking is remembered (plans mask their whole history every call)


@dataclass(frozen=True)
class Masked:
    text: str
    count: int  # secrets masked
    lines: frozenset[int]  # 1-based lines holding a masked secret


@dataclass(frozen=True)
class _Detectors:
    rules: tuple[_RegexRule, ...]  # regex detectors: mask the groups, else the whole match
    any_by_runs: bool  # whether a rule needs the text's long token runs
    entropy: tuple[Any, ...]  # high-entropy string plugins
    keyword: Any
    config_style: dict  # the keyword detector's regexes for config files (values need no quotes)
    # per entropy plugin, the patterns that find its quoted strings and the group holding the string (see
    # _quoted_string_patterns)
    quoted: tuple[tuple[tuple[re.Pattern[str], ...], int], ...]


@lru_cache(maxsize=1)
def _detectors() -> _Detectors:
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    from detect_secrets.plugins.base import RegexBasedDetector
    from detect_secrets.plugins.high_entropy_strings import HighEntropyStringsPlugin
    from detect_secrets.plugins.keyword import CONFIG_DENYLIST_REGEX_TO_GROUP, KeywordDetector

    patterns: list[re.Pattern[str]] = []
    entropy: list[Any] = []
    for cls in get_mapping_from_secret_type_to_class().values():
        if cls.__name__ in _SKIPPED_DETECTORS:
            continue
        if issubclass(cls, RegexBasedDetector):
            patterns.extend(cls().denylist)
        elif issubclass(cls, HighEntropyStringsPlugin):
            entropy.append(cls())  # detect-secrets' default limits (base64 4.5, hex 3.0)
    rules = tuple(_RegexRule.of(p) for p in patterns)
    return _Detectors(rules, any(rule.by_runs for rule in rules), tuple(entropy), KeywordDetector(), CONFIG_DENYLIST_REGEX_TO_GROUP,
                      tuple(_quoted_string_patterns(plugin) for plugin in entropy))


def _quoted_string_patterns(plugin: Any) -> tuple[tuple[re.Pattern[str], ...], int]:
    """The patterns that find a high-entropy plugin's quoted strings, and the group that holds the string.

    The plugin's own pattern, ``(['"])([charset]+)(\\1)``, starts with a group, so the regex engine tries it at every
    character (a fifth of the secret scan of textual's source). When no quote is in the charset, one pattern per
    quote (``'([charset]+)'``, ``"([charset]+)"``) finds the same strings: a match is a quote, the longest run of
    charset characters after it and the same quote, and no match of one quote can start inside one of the other
    (its inside holds no quote) or inside one of its own (but at its closing quote, which both scans skip alike).
    Each starts with a literal, which the engine looks for at C speed."""
    charset = getattr(plugin, "charset", None)
    expected = r'([\'"])([{}]+)(\1)'.format(re.escape(charset)) if isinstance(charset, str) else None
    if expected is None or plugin.regex.pattern != expected or "'" in charset or '"' in charset:
        return (plugin.regex,), 2
    body = "([{}]+)".format(re.escape(charset))
    return (re.compile("'" + body + "'"), re.compile('"' + body + '"')), 1


def load_rules() -> None:
    """Import detect-secrets and build the rules now (the first masking does it otherwise): a process about to fork
    parsers does it once for all of them."""
    _detectors()


def _literal_finder(literals: frozenset[str]) -> Callable[[str], Iterator[int]]:
    """Where in a text one of ``literals`` occurs (a case-insensitive rule's literals are lowered, and so is the text)."""
    if len(literals) == 1:
        (literal,) = literals

        def find(text: str) -> Iterator[int]:
            at = text.find(literal)
            while at >= 0:
                yield at
                at = text.find(literal, at + 1)
        return find
    alternation = re.compile("|".join(re.escape(x) for x in sorted(literals, key=len, reverse=True)))
    return lambda text: (m.start() for m in alternation.finditer(text))


@dataclass(frozen=True)
class _RegexRule:
    """A regex detector and the literals each of its matches holds (``literals.necessary_literals``): it is run on
    the lines holding them, or on the whole text when none are known."""
    pattern: re.Pattern[str]
    necessary: Necessary
    finders: tuple[Callable[[str], Iterator[int]], ...]  # one per necessary set, the most selective first
    unicode_finders: tuple[re.Pattern[str], ...]  # the same sets, case-insensitive, for a non-ASCII text

    by_runs: bool  # its lines are found from the text's long token runs, not from its first literal set

    @classmethod
    def of(cls, pattern: re.Pattern[str]) -> "_RegexRule":
        necessary = necessary_literals(pattern)
        # the text's long runs are found once for every rule, and a run of 20 is rarer in source than most literals
        by_runs = necessary.token_run >= RUN_FILTER_MIN
        return cls(pattern=pattern, necessary=necessary, by_runs=by_runs,
                   finders=tuple(_literal_finder(s) for s in necessary.sets),
                   unicode_finders=tuple(re.compile("|".join(re.escape(x) for x in sorted(s, key=len, reverse=True)),
                                                    re.IGNORECASE) for s in necessary.sets))

    def line_starts(self, text: str, lowered: str | None, runs: list[tuple[int, int]]) -> list[int]:
        """The starts of the lines of ``text`` that hold what every match needs (sorted): a literal of every necessary
        set and the run of token characters. ``runs``: the text's token runs of RUN_FILTER_MIN characters or more."""
        sets = self.necessary.sets
        unicode_fold = self.necessary.ignore_case and lowered is None  # lowering could move a non-ASCII text's offsets
        haystack = lowered if self.necessary.ignore_case and lowered is not None else text
        if self.by_runs:  # the text's long runs are known: most texts have none this long
            hits: Iterator[int] = iter([a for a, b in runs if b - a >= self.necessary.token_run])
            todo = range(len(sets))
        elif unicode_fold:
            hits = (m.start() for m in self.unicode_finders[0].finditer(text))
            todo = range(1, len(sets))
        else:
            hits = self.finders[0](haystack)
            todo = range(1, len(sets))
        starts: list[int] = []
        line_end = -1
        for at in hits:
            if at <= line_end:
                continue
            start = text.rfind("\n", 0, at) + 1
            line_end = text.find("\n", at)
            if line_end < 0:
                line_end = len(text)
            line = haystack[start:line_end]
            if all(self._holds(line, i, unicode_fold) for i in todo):
                starts.append(start)
        return starts

    def _holds(self, line: str, i: int, unicode_fold: bool) -> bool:
        if unicode_fold:
            return self.unicode_finders[i].search(line) is not None
        return any(x in line for x in self.necessary.sets[i])


# the characters beyond ASCII that a case-insensitive pattern matches to an ASCII letter, each to its letter (a test
# reads them from ``re`` itself): U+0130/U+0131 dotted and dotless I, U+017F LONG S, U+212A KELVIN SIGN
ASCII_FOLDS = {0x130: "i", 0x131: "i", 0x17F: "s", 0x212A: "k"}


def _folded(text: str) -> str | None:
    """``text`` lowered, with the characters a case-insensitive pattern takes for ASCII letters made those letters, so
    a case-insensitive literal is found by a plain search; None when lowering changes the text's length (offsets)."""
    if any(chr(cp) in text for cp in ASCII_FOLDS):  # rare: translate is slow, a search for four characters is not
        text = text.translate(ASCII_FOLDS)
    folded = text.lower()
    return folded if len(folded) == len(text) else None


def _lines_joined(text: str, starts: list[int]) -> tuple[str, list[tuple[int, int]]]:
    """The lines of ``text`` starting at ``starts``, joined, with (offset in the joined text, offset in ``text``)."""
    pieces: list[str] = []
    offsets: list[tuple[int, int]] = []
    joined = 0
    for start in starts:
        end = text.find("\n", start)
        line = text[start:] if end < 0 else text[start:end]
        offsets.append((joined, start))
        pieces.append(line)
        joined += len(line) + 1
    return "\n".join(pieces), offsets


def _match_spans(match: re.Match[str]) -> Iterator[tuple[int, int]]:
    """A detector's match: its groups where it has any (the secret inside), else the whole match."""
    if match.re.groups:
        for n in range(1, match.re.groups + 1):
            if match.group(n):
                yield match.span(n)
    else:
        yield match.span()


def _regex_spans(text: str, d: _Detectors) -> Iterator[tuple[int, int]]:
    ascii_text = text.isascii()
    lowered = text.lower() if ascii_text else _folded(text)
    runs = [m.span() for m in (_TOKEN_RUN if ascii_text else _TOKEN_RUN_UNICODE).finditer(text)] \
        if d.any_by_runs else []
    for rule in d.rules:
        if not rule.necessary.sets and not rule.by_runs:
            yield from (span for match in rule.pattern.finditer(text) for span in _match_spans(match))
            continue
        starts = rule.line_starts(text, lowered, runs)
        if not starts:
            continue
        joined, offsets = _lines_joined(text, starts)
        keys = [j for j, _ in offsets]
        for match in rule.pattern.finditer(joined):
            for a, b in _match_spans(match):
                i = bisect_right(keys, a) - 1
                start = offsets[i][1] + a - offsets[i][0]
                yield start, start + (b - a)


def _entropy_spans(text: str, d: _Detectors) -> Iterator[tuple[int, int]]:
    from detect_secrets.filters.heuristic import is_potential_uuid, is_sequential_string

    for plugin, (patterns, group) in zip(d.entropy, d.quoted):
        shortest = 2 ** plugin.entropy_limit  # a string of n characters has at most log2(n) bits of entropy each
        for pattern in patterns:
            for match in pattern.finditer(text):
                value = match.group(group)
                if len(value) <= shortest:
                    continue
                if plugin.calculate_shannon_entropy(value) <= plugin.entropy_limit:
                    continue
                if is_sequential_string(value) or is_potential_uuid(value):
                    continue
                yield match.span(group)


def _keyword_line_starts(text: str) -> list[int]:
    """Where the lines of ``text`` that name a password, a secret or a key start (the lines the keyword detector
    reads), in order: the lines holding a match of the hint pattern (a match never spans lines)."""
    lowered = text.lower()
    if len(lowered) != len(text):  # a character whose lower case is longer ("İ"): positions would shift
        return sorted({text.rfind("\n", 0, m.start()) + 1 for m in _KEYWORD_HINT.finditer(text)})
    starts: set[int] = set()
    search = _KEYWORD_HINT_LOWER.search
    for word in _KEYWORD_HINT_WORDS:
        at = lowered.find(word)
        while at >= 0:
            start = lowered.rfind("\n", 0, at) + 1
            end = lowered.find("\n", at)
            if end < 0:
                end = len(lowered)
            if start not in starts and search(lowered, start, end):
                starts.add(start)
            at = lowered.find(word, end)
    return sorted(starts)


def _keyword_spans(text: str, filename: str, d: _Detectors) -> Iterator[tuple[int, int]]:
    from detect_secrets.filters.heuristic import is_indirect_reference, is_prefixed_with_dollar_sign, is_templated_secret
    from detect_secrets.plugins.keyword import REGEX_BY_FILETYPE
    from detect_secrets.util.filetype import determine_file_type

    # code: the detector's rules for the file's language; free text (transcripts, tool output holding a
    # .env or YAML): its config-file rules, where a value needs no quotes
    regexes = REGEX_BY_FILETYPE.get(determine_file_type(filename)) if filename else None
    if regexes is None:
        regexes = d.config_style
    for offset in _keyword_line_starts(text):
        end = text.find("\n", offset)
        line = text[offset:] if end < 0 else text[offset:end]
        if is_indirect_reference(line):
            continue
        for value in d.keyword.analyze_string(line, denylist_regex_to_group=regexes):
            value = (value or "").strip()
            if (len(value) < _MIN_KEYWORD_VALUE or MASK in value or is_templated_secret(value)
                    or is_prefixed_with_dollar_sign(value) or not looks_like_a_value(value)):
                continue
            start = line.find(value)
            while start >= 0:
                yield offset + start, offset + start + len(value)
                start = line.find(value, start + len(value))


def find_spans(text: str, filename: str = "") -> list[tuple[int, int]]:
    """The (start, end) character spans of the secrets in ``text``, sorted, overlaps merged."""
    d = _detectors()
    spans = list(_regex_spans(text, d))
    spans.extend(_entropy_spans(text, d))
    spans.extend(_keyword_spans(text, filename, d))
    spans.extend(extra_spans(text))
    spans = [(a, b) for a, b in spans if b > a and MASK not in text[a:b]]
    spans.sort()
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        if merged and start < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def mask_text(text: str, filename: str = "") -> Masked:
    """``text`` with every secret replaced by ``[REDACTED]`` (private key bodies line by line)."""
    if not text:
        return Masked(text, 0, frozenset())
    lines: set[int] = set()
    count = 0
    if "PRIVATE KEY" in text:
        text, key_lines = mask_private_keys(text, MASK)
        if key_lines:
            lines.update(key_lines)
            count += count_key_blocks(text)
    spans = find_spans(text, filename)
    if not spans:
        return Masked(text, count, frozenset(lines))
    pieces: list[str] = []
    last = 0
    for start, end in spans:
        pieces.append(text[last:start])
        pieces.append(MASK)
        lines.add(text.count("\n", 0, start) + 1)
        last = end
    pieces.append(text[last:])
    return Masked("".join(pieces), count + len(spans), frozenset(lines))


def count_masks(text: str) -> int:
    """How many ``[REDACTED]`` marks ``text`` holds."""
    return text.count(MASK) if text else 0


_CACHE: OrderedDict[str, tuple[str, int]] = OrderedDict()
_CACHE_LOCK = threading.Lock()
# masking done before, by text key (None: the text comes back unchanged): handed over by a store
# (``store.derived_texts``) so a fresh process does not scan a long session again; used once, then in _CACHE
_KNOWN: dict[bytes, tuple[str | None, int]] = {}
# masking done here and not yet taken by a store, per session (``records.derived``): text -> (text key, masking);
# by text, so a cache hit claims what was masked outside any session without hashing the text
# (a whole file's, ``redact_file_cached``: by its key, so the process keeps no copy of the file)
_FRESH: FreshValues[str | bytes, tuple[bytes, tuple[str | None, int]]] = FreshValues(MASKED_CACHE_SIZE)
# masking of whole source files by text key (None: the file comes back unchanged)
_FILES: OrderedDict[bytes, tuple[str | None, int]] = OrderedDict()


def _hit(cache: OrderedDict, key: str | bytes) -> Any:
    """``cache[key]`` as the newest entry (None: not there), claimed for the session being derived for when it was
    masked outside any session. Called under ``_CACHE_LOCK``."""
    found = cache.get(key)
    if found is not None:
        cache.move_to_end(key)
        if _FRESH.unclaimed:
            _FRESH.claim(key)
    return found


def _keep(cache: OrderedDict, key: str | bytes, value: Any) -> None:
    """``cache[key] = value``, the oldest entries beyond ``MASKED_CACHE_SIZE`` dropped. Called under ``_CACHE_LOCK``."""
    cache[key] = value
    while len(cache) > MASKED_CACHE_SIZE:
        cache.popitem(last=False)


def redact_cached(text: str) -> tuple[str, int]:
    """:func:`mask_text` of free text (messages), remembered: a plan masks the whole history on every call."""
    if not text:
        return text, 0
    with _CACHE_LOCK:
        found = _hit(_CACHE, text)
    if found is not None:
        return found
    key = text_key(text)
    with _CACHE_LOCK:
        known = _KNOWN.pop(key, None)
    if known is not None:
        value = (text if known[0] is None else known[0], known[1])
    else:
        result = mask_text(text)
        value = (result.text, result.count)
    with _CACHE_LOCK:
        _keep(_CACHE, text, value)
        if known is None:
            _FRESH.add(text, (key, (None if value[0] == text else value[0], value[1])))
    return value


def redact_file_cached(text: str) -> tuple[str, int]:
    """:func:`mask_text` of a whole source file read for an excerpt (no filename, as free text), remembered by the
    text's key rather than the text: a file is read again and again, and the memory holds no copy of it. Kept by the
    session's store like a message's masking (``store.derived_texts``), so a reopened session scans no file again."""
    if not text:
        return text, 0
    key = text_key(text)
    with _CACHE_LOCK:
        found = _hit(_FILES, key)
        if found is None:
            found = _KNOWN.pop(key, None)
            if found is not None:
                _keep(_FILES, key, found)
    if found is None:
        result = mask_text(text)
        found = (None if result.text == text else result.text, result.count)
        with _CACHE_LOCK:
            _keep(_FILES, key, found)
            _FRESH.add(key, (key, found))
    return (text if found[0] is None else found[0]), found[1]


@lru_cache(maxsize=1)
def rules_fingerprint() -> str:
    """What masking depends on, as a short hex digest: this package's rule sources and detect-secrets' version.
    Masking kept in a store is used only under the same fingerprint (a new rule masks old texts again). Read once
    per process (it was read from disk on every plan that stored what it masked)."""
    import hashlib
    from importlib.metadata import PackageNotFoundError, version
    from pathlib import Path

    from ctxbench.redaction import literals, rules

    digest = hashlib.blake2b(digest_size=8)
    for source in (Path(__file__), Path(rules.__file__), Path(literals.__file__)):
        digest.update(source.read_bytes())
    try:
        digest.update(version("detect-secrets").encode())
    except PackageNotFoundError:  # pragma: no cover - a dependency of the package
        pass
    return digest.hexdigest()


def remember_masks(known: Mapping[bytes, tuple[str | None, int]]) -> None:
    """Take masking done earlier (text key -> (masked text or None when unchanged, secrets masked)): those texts
    are not scanned again."""
    with _CACHE_LOCK:
        _KNOWN.update(known)
        while len(_KNOWN) > MASKED_CACHE_SIZE:
            _KNOWN.pop(next(iter(_KNOWN)))


def take_fresh_masks(session_id: str) -> dict[bytes, tuple[str | None, int]]:
    """The masking of ``session_id``'s texts done (not remembered) since the last call, by text key; forgotten here.
    Other sessions' stay for their own stores."""
    with _CACHE_LOCK:
        fresh = _FRESH.take(session_id)
    return dict(fresh.values())


def forget_fresh_masks(session_id: str) -> None:
    """Drop the masking of ``session_id``'s texts no store took yet (the session is deleted)."""
    with _CACHE_LOCK:
        _FRESH.forget(session_id)


def forget_masks() -> None:
    """Forget every remembered masking (benchmarks of a first plan, tests)."""
    with _CACHE_LOCK:
        _CACHE.clear()
        _FILES.clear()
        _KNOWN.clear()
        _FRESH.forget()
