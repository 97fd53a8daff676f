"""Image files as an assistant attaches them, made byte by byte (no imaging library): the headers the proxy reads
an image's size from, with a body of filler after them, and the base64 a request carries."""
from __future__ import annotations

import base64
import struct
import zlib

FILLER = bytes(range(256)) * 4  # stands for the pixel data (the proxy reads only the header)


def png(width: int, height: int) -> bytes:
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)
    chunk = struct.pack(">I", len(ihdr)) + b"IHDR" + ihdr + struct.pack(">I", zlib.crc32(b"IHDR" + ihdr))
    return b"\x89PNG\r\n\x1a\n" + chunk + FILLER


def jpeg(width: int, height: int, exif_bytes: int = 5000) -> bytes:
    """A JPEG with an APP0 and an EXIF-sized APP1 segment before its frame header (cameras put one there)."""
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    exif = b"Exif\x00\x00" + bytes(exif_bytes)
    app1 = b"\xff\xe1" + struct.pack(">H", len(exif) + 2) + exif
    sof = b"\xff\xc2" + struct.pack(">HBHHB", 17, 8, height, width, 3) + bytes(9)
    return b"\xff\xd8" + app0 + app1 + sof + FILLER


def gif(width: int, height: int) -> bytes:
    return b"GIF89a" + struct.pack("<HH", width, height) + b"\x00\x00\x00" + FILLER


def _riff(chunk: bytes, payload: bytes) -> bytes:
    body = b"WEBP" + chunk + struct.pack("<I", len(payload)) + payload
    return b"RIFF" + struct.pack("<I", len(body)) + body


def webp_lossy(width: int, height: int) -> bytes:
    return _riff(b"VP8 ", b"\x00\x00\x00\x9d\x01\x2a" + struct.pack("<HH", width, height) + FILLER)


def webp_lossless(width: int, height: int) -> bytes:
    bits = (width - 1) | ((height - 1) << 14)
    return _riff(b"VP8L", b"\x2f" + struct.pack("<I", bits) + FILLER)


def webp_extended(width: int, height: int) -> bytes:
    return _riff(b"VP8X", b"\x10\x00\x00\x00" + (width - 1).to_bytes(3, "little")
                 + (height - 1).to_bytes(3, "little") + FILLER)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def data_url(data: bytes, media_type: str = "image/png") -> str:
    return f"data:{media_type};base64,{b64(data)}"
