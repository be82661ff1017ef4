"""Writes the small image files the image tests and the fuzz seed corpus use.

Run with /usr/bin/python3 (needs PIL): python3 tests/data/make_image_fixtures.py
  tests/data/images/quadrants_16x16.jpg   four flat colours, quality 95, no chroma subsampling;
                                           prints PIL's decoded quadrant centres for the test
  tests/fuzz/corpus/image_decode/*         valid tiny PNG/JPEG seeds and malformed ones
"""
import io
import os
import struct
import zlib

from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "..", "fuzz", "corpus", "image_decode")
QUADRANTS = [(200, 30, 40), (20, 180, 60), (30, 60, 210), (240, 240, 240)]  # TL, TR, BL, BR


def quadrants(size=16):
    img = Image.new("RGB", (size, size))
    h = size // 2
    for k, colour in enumerate(QUADRANTS):
        x0, y0 = (k % 2) * h, (k // 2) * h
        img.paste(colour, (x0, y0, x0 + h, y0 + h))
    return img


def encoded(img, fmt, **kw):
    buf = io.BytesIO()
    img.save(buf, fmt, **kw)
    return buf.getvalue()


def png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def png_claiming(width, height):
    """A PNG whose IHDR claims width x height (valid CRCs) with one tiny IDAT."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) + png_chunk(b"IDAT", zlib.compress(b"\0" * 16))
            + png_chunk(b"IEND", b""))


def main():
    jpg = encoded(quadrants(), "JPEG", quality=95, subsampling=0)
    with open(os.path.join(HERE, "images", "quadrants_16x16.jpg"), "wb") as f:
        f.write(jpg)
    decoded = Image.open(io.BytesIO(jpg)).convert("RGB")
    print("PIL's quadrant centres (x, y) -> RGB:")
    for (x, y) in [(4, 4), (12, 4), (4, 12), (12, 12)]:
        print(f"  ({x}, {y}) -> {decoded.getpixel((x, y))}")

    os.makedirs(CORPUS, exist_ok=True)
    rgb_png = encoded(quadrants(4), "PNG")
    seeds = {
        "valid_rgb_4x4.png": rgb_png,
        "valid_gray_3x2.png": encoded(Image.new("L", (3, 2), 77), "PNG"),
        "valid_rgba_2x2.png": encoded(Image.new("RGBA", (2, 2), (1, 2, 3, 4)), "PNG"),
        "valid_palette_5x5.png": encoded(quadrants(5).convert("P"), "PNG"),
        "valid_16bit_2x2.png": encoded(Image.new("I;16", (2, 2), 4000), "PNG"),
        "valid_baseline_8x8.jpg": encoded(quadrants(8), "JPEG", quality=80),
        "valid_progressive_8x8.jpg": encoded(quadrants(8), "JPEG", quality=80, progressive=True),
        "valid_gray_8x8.jpg": encoded(quadrants(8).convert("L"), "JPEG", quality=80),
        "bad_truncated.png": rgb_png[: len(rgb_png) // 2],
        "bad_truncated.jpg": jpg[: len(jpg) // 2],
        "bad_garbage.png": bytes((i * 37 + 11) % 256 for i in range(64)),
        "bad_empty.png": b"",
        "bad_huge_header.png": png_claiming(100000, 100000),
        "bad_zero_width.png": png_claiming(0, 4),
        "bad_gif_header.gif": b"GIF89a\x01\x00\x01\x00\x00\x00\x00;",
    }
    for name, data in seeds.items():
        with open(os.path.join(CORPUS, name), "wb") as f:
            f.write(data)
    print(f"wrote {len(seeds)} seeds to {os.path.normpath(CORPUS)}")


if __name__ == "__main__":
    main()
