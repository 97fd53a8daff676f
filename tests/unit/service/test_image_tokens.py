"""An image in a proxied request is counted as its provider bills it, from the size in the image's own header
(PNG, JPEG, GIF, WebP), not as text: Anthropic by its pixels, OpenAI by 512-px tiles, Gemini by 768-px tiles."""
from __future__ import annotations

import pytest
from image_bytes import b64, gif, jpeg, png, webp_extended, webp_lossless, webp_lossy

from ctxbench.service.proxy.images import (UNKNOWN_SIZE, anthropic_count, base64_size, gemini_count, image_count,
                                           image_size, openai_count)


@pytest.mark.parametrize("make", [png, jpeg, gif, webp_lossy, webp_lossless, webp_extended])
def test_an_images_size_is_read_from_its_header(make):
    assert image_size(make(1234, 567)) == (1234, 567)
    assert base64_size(b64(make(801, 3001))) == (801, 3001)


def test_a_jpegs_size_is_found_past_a_large_exif_block():
    photo = jpeg(4032, 3024, exif_bytes=60_000) + bytes(500_000)  # a phone photo's metadata, then its pixels
    assert base64_size(b64(photo)) == (4032, 3024)


def test_bytes_that_are_no_known_image_have_no_size():
    assert image_size(b"not an image at all") is None
    assert image_size(png(10, 10)[:20]) is None  # cut inside the header
    assert image_size(jpeg(10, 10)[:300]) is None  # cut before the frame header
    assert base64_size("%%% not base64 %%%") is None


def test_anthropic_counts_pixels_over_750_after_scaling_to_its_limits():
    small = anthropic_count(200, 200)
    assert small.tokens == 54 and small.billed == (200, 200) and not small.estimated  # 40,000 / 750 = 53.3
    assert anthropic_count(1092, 1092).tokens == 1590  # the largest square sent unscaled
    wide = anthropic_count(3000, 2000)  # scaled to ~1,600 tokens (1.2 MP), then 1341x894
    assert wide.billed == (1341, 894) and wide.tokens == 1599
    tall = anthropic_count(400, 4000)  # the long side to 1568 first
    assert tall.billed == (156, 1568) and tall.tokens == 327
    assert "1341×894" in wide.label() and "3000×2000" in wide.label() and "/750" in wide.label()


def test_openai_counts_512_pixel_tiles_after_fitting_2048_and_a_768_short_side():
    assert openai_count(4000, 3000, "low").tokens == 85
    square = openai_count(1024, 1024, "high")
    assert square.billed == (768, 768) and square.tokens == 85 + 170 * 4
    tall = openai_count(2048, 4096, "auto")
    assert tall.billed == (768, 1536) and tall.tokens == 85 + 170 * 6
    small = openai_count(300, 200, "")
    assert small.billed == (300, 200) and small.tokens == 85 + 170
    assert "512-px tiles" in square.label() and "detail high" in square.label()


def test_gemini_counts_258_a_small_image_and_258_a_768_pixel_tile_of_a_larger_one():
    assert gemini_count(384, 300).tokens == 258
    assert gemini_count(1000, 500).tokens == 258 * 2
    assert gemini_count(2000, 2000).tokens == 258 * 9


def test_an_image_of_unknown_size_is_counted_as_a_fallback_marked_as_an_estimate():
    count = image_count("anthropic", None)
    assert count.estimated and count.width is None
    assert count.tokens == anthropic_count(*UNKNOWN_SIZE).tokens
    assert "size unknown" in count.label() and "estimate" in count.label()
    assert image_count("openai", "%%%", "low").tokens == 85  # low detail needs no size
    known = image_count("gemini", b64(png(300, 200)))
    assert known.tokens == 258 and not known.estimated and known.width == 300
