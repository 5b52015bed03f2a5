#!/usr/bin/env python3
"""Counts pixels of given colours in a PNG (8-bit RGB/RGBA, non-interlaced,
as Chromium writes screenshots). Used by tests/test_report.c to check that a
report's SVG charts were rendered. Standard library only.

usage: png_colors.py FILE RRGGBB...   prints "RRGGBB COUNT" per colour
"""
import collections
import struct
import sys
import zlib


def pixels(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise SystemExit(f"{path}: not a PNG")
    pos, idat, hdr = 8, b"", None
    while pos + 8 <= len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            hdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    w, h, depth, ctype, _, _, interlace = hdr
    if depth != 8 or ctype not in (2, 6) or interlace:
        raise SystemExit(f"{path}: unsupported PNG (depth {depth}, colour type {ctype}, interlace {interlace})")
    bpp = 3 if ctype == 2 else 4
    raw, stride = zlib.decompress(idat), w * bpp
    prev, out, i = bytearray(stride), [], 0
    for _ in range(h):
        f, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b, c = prev[x], prev[x - bpp] if x >= bpp else 0
            if f == 1:
                line[x] = (line[x] + a) & 255
            elif f == 2:
                line[x] = (line[x] + b) & 255
            elif f == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        out.append(line)
        prev = line
    return w, h, bpp, out


def main():
    w, h, bpp, rows = pixels(sys.argv[1])
    seen = collections.Counter()
    for line in rows:
        seen.update(zip(line[0::bpp], line[1::bpp], line[2::bpp]))
    for s in sys.argv[2:]:
        rgb = tuple(int(s[k:k + 2], 16) for k in (0, 2, 4))
        n = sum(c for px, c in seen.items() if all(abs(px[k] - rgb[k]) <= 2 for k in range(3)))
        print(s, n)


if __name__ == "__main__":
    main()
