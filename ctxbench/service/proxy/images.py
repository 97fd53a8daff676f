"""Images in a proxied request, counted as each provider bills them, not as text.

The size comes from the image's own header (PNG, JPEG, GIF, WebP; no imaging library), the tokens from the
provider's published rule:

- **Anthropic** (Messages): ``width × height / 750``, rounded up, after the image is scaled down (aspect kept) until
  its long side is at most 1568 px and it is at most ~1,600 tokens (1.2 MP; 1092×1092 is the largest square sent
  unscaled). Example: 3000×2000 → 1341×894 → 1,599 tokens.
- **OpenAI** (Chat Completions ``image_url``, Responses ``input_image``): ``detail: low`` is 85 tokens; ``high``,
  ``auto`` or none: the image is fitted within 2048×2048, then scaled so its short side is 768 px (never up),
  and billed 85 + 170 per 512-px tile. Example: 2048×4096 → 768×1536 → 6 tiles → 1,105 tokens. (Newer models
  that count 32-px patches are not modelled; the tile rule is the documented one for GPT-4o and GPT-4.1.)
- **Gemini** (``inlineData``, ``fileData``): 258 tokens when both sides are at most 384 px; a larger image is cut
  into 768×768 tiles of 258 tokens each, ``ceil(w / 768) × ceil(h / 768)`` of them (Gemini 2.x's rule as
  documented; Google does not publish how it crops, so this whole-tile count is our reading of it, and Gemini 3's
  ``media_resolution`` budgets are not modelled). Example: 1000×500 → 2 tiles → 516 tokens.

An image whose size cannot be read (a URL, a file reference, bytes no header parser knows) is counted as a
UNKNOWN_SIZE image and marked as an estimate. Pure: bytes in, counts out.
"""
from __future__ import annotations

import base64
import binascii
import math
import struct
from dataclasses import dataclass

# Anthropic
ANTHROPIC_PIXELS_PER_TOKEN = 750
ANTHROPIC_MAX_SIDE = 1568  # px: the long side an image is scaled down to
ANTHROPIC_MAX_TOKENS = 1600  # an image above ~1,600 tokens is scaled down to it (1.2 MP)
# OpenAI
OPENAI_LOW_TOKENS = 85  # detail low, and the base of every high-detail image
OPENAI_TILE_TOKENS = 170
OPENAI_TILE = 512  # px
OPENAI_FIT = 2048  # px: the square an image is first fitted within
OPENAI_SHORT_SIDE = 768  # px: the short side it is then scaled down to
# Gemini
GEMINI_IMAGE_TOKENS = 258  # one small image, or one tile of a larger one
GEMINI_SMALL_SIDE = 384  # px: an image with both sides at most this is one 258-token image
GEMINI_TILE = 768  # px
# an image whose size cannot be read is counted as one this large (and marked as an estimate)
UNKNOWN_SIZE = (1024, 1024)
# how much of an image's base64 is decoded to find its size, in turn: the head, then past a JPEG's metadata segments
# (EXIF, ICC profiles: up to 64 KB each), then all of it
HEADER_BASE64_CHARS = (8192, 262_144)

PROVIDER_NAMES = {"anthropic": "Anthropic", "openai": "OpenAI", "responses": "OpenAI", "gemini": "Gemini"}


@dataclass(frozen=True)
class ImageCount:
    """What one image costs, and by which rule."""

    tokens: int
    width: int | None  # as sent (None: unknown)
    height: int | None
    billed: tuple[int, int]  # the size the rule billed (after the provider's scaling; UNKNOWN_SIZE when unknown)
    rule: str  # the provider's rule, in words
    estimated: bool = False  # the size was not known: counted as UNKNOWN_SIZE

    def label(self) -> str:
        """``image 3000×2000 → 1341×894: 1,599 tok (Anthropic: w×h/750 …)``; an unknown size says so."""
        if self.width is None or self.height is None:
            size = f"size unknown, counted as {self.billed[0]}×{self.billed[1]} (an estimate)"
        else:
            size = f"{self.width}×{self.height}"
            if self.billed != (self.width, self.height):
                size += f" → {self.billed[0]}×{self.billed[1]}"
        return f"image {size}: {self.tokens:,} tok ({self.rule})"


# -- sizes from headers ---------------------------------------------------------------------------------------------
def image_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) of a PNG, JPEG, GIF or WebP image from its header; None for anything else or a cut header."""
    try:
        if data.startswith(b"\x89PNG\r\n\x1a\n") and data[12:16] == b"IHDR":
            return _positive(*struct.unpack(">II", data[16:24]))
        if data[:6] in (b"GIF87a", b"GIF89a"):
            return _positive(*struct.unpack("<HH", data[6:10]))
        if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
            return _webp_size(data)
        if data.startswith(b"\xff\xd8"):
            return _jpeg_size(data)
    except (struct.error, IndexError):
        return None
    return None


def _positive(width: int, height: int) -> tuple[int, int] | None:
    return (width, height) if width > 0 and height > 0 else None


def _webp_size(data: bytes) -> tuple[int, int] | None:
    chunk, payload = data[12:16], data[20:]
    if chunk == b"VP8X":
        return _positive(int.from_bytes(payload[4:7], "little") + 1, int.from_bytes(payload[7:10], "little") + 1)
    if chunk == b"VP8L" and payload[:1] == b"\x2f":
        bits = int.from_bytes(payload[1:5], "little")
        return _positive((bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1)
    if chunk == b"VP8 " and payload[3:6] == b"\x9d\x01\x2a":
        width, height = struct.unpack("<HH", payload[6:10])
        return _positive(width & 0x3FFF, height & 0x3FFF)
    return None


# JPEG frame headers (SOF0..SOF15 but DHT, JPG and DAC), where the size is
_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    at = 2
    while at + 4 <= len(data):
        if data[at] != 0xFF:
            return None
        marker = data[at + 1]
        if marker == 0xFF:  # fill byte
            at += 1
            continue
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:  # markers without a length
            at += 2
            continue
        if marker in (0xD9, 0xDA):  # end of image, start of scan: no frame header before it
            return None
        (length,) = struct.unpack(">H", data[at + 2:at + 4])
        if marker in _SOF:
            if at + 9 > len(data):
                return None
            height, width = struct.unpack(">HH", data[at + 5:at + 9])
            return _positive(width, height)
        at += 2 + length
    return None


def base64_size(text: str) -> tuple[int, int] | None:
    """The size of the image in ``text`` (base64): from its head (HEADER_BASE64_CHARS), else from all of it."""
    for chars in (*(text[:n] for n in HEADER_BASE64_CHARS if n < len(text)), text):
        head = chars[: len(chars) - len(chars) % 4]
        try:
            size = image_size(base64.b64decode(head, validate=False))
        except (binascii.Error, ValueError):
            return None
        if size is not None or len(chars) == len(text):
            return size
    return None


def data_url_base64(url: str) -> str | None:
    """The base64 of a ``data:…;base64,…`` URL, or None for any other URL."""
    if not url.startswith("data:"):
        return None
    head, _comma, data = url.partition(",")
    return data if head.endswith(";base64") else None


# -- the providers' rules ------------------------------------------------------------------------------------------
def anthropic_count(width: int, height: int) -> ImageCount:
    scale = min(1.0, ANTHROPIC_MAX_SIDE / max(width, height),
                math.sqrt(ANTHROPIC_MAX_TOKENS * ANTHROPIC_PIXELS_PER_TOKEN / (width * height)))
    billed = (width, height) if scale >= 1 else (max(1, int(width * scale)), max(1, int(height * scale)))
    tokens = math.ceil(billed[0] * billed[1] / ANTHROPIC_PIXELS_PER_TOKEN)
    return ImageCount(tokens, width, height, billed,
                      f"Anthropic: w×h/{ANTHROPIC_PIXELS_PER_TOKEN} after scaling to ≤{ANTHROPIC_MAX_SIDE} px, "
                      f"≤{ANTHROPIC_MAX_TOKENS:,} tok")


def openai_count(width: int, height: int, detail: str = "") -> ImageCount:
    detail = detail or "auto"
    if detail == "low":
        return ImageCount(OPENAI_LOW_TOKENS, width, height, (width, height), "OpenAI: detail low, 85 tok")
    w, h = float(width), float(height)
    if max(w, h) > OPENAI_FIT:
        w, h = w * OPENAI_FIT / max(w, h), h * OPENAI_FIT / max(w, h)
    if min(w, h) > OPENAI_SHORT_SIDE:
        w, h = w * OPENAI_SHORT_SIDE / min(w, h), h * OPENAI_SHORT_SIDE / min(w, h)
    billed = (max(1, round(w)), max(1, round(h)))
    tiles = math.ceil(billed[0] / OPENAI_TILE) * math.ceil(billed[1] / OPENAI_TILE)
    return ImageCount(OPENAI_LOW_TOKENS + OPENAI_TILE_TOKENS * tiles, width, height, billed,
                      f"OpenAI: detail {detail}, 85 + 170 × {tiles} {OPENAI_TILE}-px tiles")


def gemini_count(width: int, height: int) -> ImageCount:
    if width <= GEMINI_SMALL_SIDE and height <= GEMINI_SMALL_SIDE:
        return ImageCount(GEMINI_IMAGE_TOKENS, width, height, (width, height),
                          f"Gemini: {GEMINI_IMAGE_TOKENS} tok an image ≤{GEMINI_SMALL_SIDE} px")
    tiles = math.ceil(width / GEMINI_TILE) * math.ceil(height / GEMINI_TILE)
    return ImageCount(GEMINI_IMAGE_TOKENS * tiles, width, height, (width, height),
                      f"Gemini: {GEMINI_IMAGE_TOKENS} × {tiles} {GEMINI_TILE}-px tiles")


def image_count(provider: str, data: str | None, detail: str = "") -> ImageCount:
    """The tokens of one image sent to ``provider`` (``anthropic``, ``openai``, ``responses``, ``gemini``), from its
    base64 ``data`` (None: not in the request, a URL or a file reference) and OpenAI's ``detail``."""
    size = base64_size(data) if data else None
    width, height = size or UNKNOWN_SIZE
    if provider == "anthropic":
        count = anthropic_count(width, height)
    elif provider == "gemini":
        count = gemini_count(width, height)
    else:
        count = openai_count(width, height, detail)
    if size is None:
        return ImageCount(count.tokens, None, None, count.billed, count.rule, estimated=True)
    return count
