"""What the proxy keeps of a request body while it streams the body on to the upstream.

:class:`BodyTap` sees each chunk on its way upstream. A body up to ``keep_bytes`` is kept whole; past that,
the tap keeps the body with every JSON string longer than ``cut_bytes`` cut (:class:`JsonCutter`), so a
50 MB request is forwarded as it arrives and recorded from a copy of a few hundred kilobytes. A body
whose cut copy still outgrows ``keep_bytes`` (tens of thousands of short texts) is not recorded.

The cutter reads the JSON only as far as strings go (where each starts and ends, escapes included), with
C-speed searches for the next quote or backslash: a cut string keeps its first ``cut_bytes`` bytes, never
half an escape or half a UTF-8 character, then says ``[cut by ctxbench: N of M bytes recorded]``. What
it gives is JSON whenever the body was.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass

CUT_MARK = " … [cut by ctxbench: {kept:,} of {total:,} bytes recorded]"
_SPECIAL = re.compile(rb'["\\]')
_MAX_TRIM = 16  # bytes dropped at most from a cut string's end to end on a whole escape and character


@dataclass(frozen=True)
class BodyCut:
    """How a body above the record limit was cut for recording."""

    body_bytes: int  # the body's size as forwarded
    cut_bytes: int  # the size each longer text was cut to
    texts_cut: int  # how many texts were cut

    def note(self) -> str:
        return (f"request of {self.body_bytes:,} bytes, above the record limit: forwarded as sent, recorded with "
                f"{self.texts_cut:,} text(s) cut to {self.cut_bytes:,} bytes; its tokens are those of the recorded text")


class JsonCutter:
    """A JSON text fed in pieces, kept with every string longer than ``cut_bytes`` cut."""

    def __init__(self, cut_bytes: int) -> None:
        self.cut_bytes = cut_bytes
        self.out = bytearray()
        self.texts_cut = 0
        self._in_string = False
        self._escape = False  # the last piece ended inside an escape (after its backslash)
        self._start = 0  # where the current string's text starts in ``out``
        self._total = 0  # the current string's bytes so far (as JSON)

    def feed(self, chunk: bytes) -> None:
        i, n = 0, len(chunk)
        while i < n:
            if not self._in_string:
                j = chunk.find(b'"', i)
                if j < 0:
                    self.out += chunk[i:]
                    return
                self.out += chunk[i:j + 1]
                self._in_string, self._start, self._total = True, len(self.out), 0
                i = j + 1
                continue
            if self._escape:
                self._text(chunk[i:i + 1])
                self._escape = False
                i += 1
                continue
            m = _SPECIAL.search(chunk, i)
            if m is None:
                self._text(chunk[i:])
                return
            j = m.start()
            self._text(chunk[i:j])
            if chunk[j] == 0x5C:  # a backslash: it and the character it escapes are text
                if j + 1 < n:
                    self._text(chunk[j:j + 2])
                    i = j + 2
                else:
                    self._text(chunk[j:j + 1])
                    self._escape = True
                    i = j + 1
            else:
                self._close()
                i = j + 1

    def _text(self, piece: bytes) -> None:
        room = self.cut_bytes - (len(self.out) - self._start)
        if room > 0:
            self.out += piece[:room]
        self._total += len(piece)

    def _close(self) -> None:
        if self._total > self.cut_bytes:
            kept = bytes(self.out[self._start:])
            for _ in range(_MAX_TRIM):
                if _whole_text(kept):
                    break
                kept = kept[:-1]
            del self.out[self._start:]
            self.out += kept + CUT_MARK.format(kept=len(kept), total=self._total).encode("utf-8")
            self.texts_cut += 1
        self.out += b'"'
        self._in_string = False


def _whole_text(text: bytes) -> bool:
    """Whether ``text`` is a JSON string's inside that ends on a whole escape and a whole character."""
    try:
        value = json.loads(b'"' + text + b'"')
    except ValueError:
        return False
    return not value or not 0xD800 <= ord(value[-1]) <= 0xDBFF  # not half a surrogate pair


class BodyTap:
    """Keeps what may be recorded of a body as it streams past: whole up to ``keep_bytes``, else cut."""

    def __init__(self, keep_bytes: int, cut_bytes: int) -> None:
        self.keep_bytes = keep_bytes
        self.cut_bytes = cut_bytes
        self.size = 0
        self.complete = False  # the whole body went past
        self._whole: bytearray | None = bytearray()
        self._cutter: JsonCutter | None = None
        self.overflow = False  # even cut, the body outgrew keep_bytes: nothing is kept

    def feed(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if self.overflow:
            return
        if self._whole is not None:
            if len(self._whole) + len(chunk) <= self.keep_bytes:
                self._whole += chunk
                return
            self._cutter = JsonCutter(self.cut_bytes)
            self._cutter.feed(bytes(self._whole))
            self._whole = None
        assert self._cutter is not None
        self._cutter.feed(chunk)
        if len(self._cutter.out) > self.keep_bytes:
            self._cutter, self.overflow = None, True

    def result(self) -> tuple[bytes | None, BodyCut | None]:
        """The body to record (None: nothing can be) and how it was cut (None: it is whole)."""
        if self._whole is not None:
            return bytes(self._whole), None
        if self._cutter is None:
            return None, None
        return bytes(self._cutter.out), BodyCut(self.size, self.cut_bytes, self._cutter.texts_cut)
