#!/usr/bin/python3
"""Test images and golden outputs for package vision, made with Debian's
python3-pil and python3-torchvision (run with /usr/bin/python3).

    /usr/bin/python3 scripts/make_vision_goldens.py [vision/testdata]

Writes small images cut from the photos of Debian's mate-backgrounds, in
every layout vision must read as PIL's convert("RGB") does (JPEG 4:2:0,
4:2:2, 4:4:4, grayscale, CMYK, progressive; PNG RGB, RGBA, palette with and
without transparency, grayscale 8 and 16 bits (and 16 with a transparent
value), RGB 16 bits, gray+alpha; the rest of torchvision's IMG_EXTENSIONS:
WebP lossy, lossy with alpha and lossless, BMP, TIFF, PPM and PGM, raw and
plain, 8 and 16 bits, and PBM), and for each a few geometries: torchvision's eval transform
(Resize + CenterCrop) and RandomResizedCrop boxes (resized_crop, then
hflip). Each golden is the uint8 HWC output of torchvision's PIL path,
before ToTensor; one float32 golden checks ToTensor + Normalize.
Deterministic: same packages, same bytes.
"""
import json
import os
import random
import struct
import sys
import zlib

import numpy as np
from PIL import Image
import torch
import torchvision
import torchvision.transforms.functional as F

PHOTOS = "/usr/share/backgrounds/mate/nature"
SIZE = 32          # output side of the goldens
RESIZE = 36        # eval: shorter side before the center crop
MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]


def photo(name, w, h):
    im = Image.open(os.path.join(PHOTOS, name)).convert("RGB")
    # a crop of the photo, reduced to w x h: a small real photograph
    W, H = im.size
    box = (W // 5, H // 6, W // 5 + W // 2, H // 6 + H // 2)
    return im.crop(box).resize((w, h), Image.BILINEAR)


def chunk(t, d):
    return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)


def png16_gray_trns(path, im):
    """A 16-bit grayscale PNG with a transparent value (PIL cannot write
    one): samples v*3, the top row transparent."""
    a = np.asarray(im.convert("L"), dtype=np.uint16) * 3
    a[0, :] = 300
    raw = b"".join(b"\x00" + a[y].astype(">u2").tobytes() for y in range(a.shape[0]))
    ihdr = struct.pack(">IIBBBBB", a.shape[1], a.shape[0], 16, 0, 0, 0, 0)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"tRNS", struct.pack(">H", 300)) +
                chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def plain_pnm(path, im, magic, maxval):
    """A plain (ASCII) Netpbm file, with comments, samples scaled to maxval."""
    a = np.asarray(im, dtype=np.uint32)
    if magic == "P1":
        vals = (a < 128).astype(np.uint32)  # 1 is black
        head = "P1\n# a comment\n%d %d\n" % im.size
    else:
        vals = a * maxval // 255
        head = "%s\n%d %d # size\n%d\n" % (magic, im.size[0], im.size[1], maxval)
    body = "\n".join(" ".join(str(v) for v in row.ravel()) for row in vals)
    with open(path, "w") as f:
        f.write(head + body + "\n")


def raw_pnm16(path, im, magic, maxval):
    """A raw Netpbm file of 16-bit samples scaled to maxval."""
    a = (np.asarray(im, dtype=np.uint32) * maxval // 255).astype(">u2")
    with open(path, "wb") as f:
        f.write(b"%s\n%d %d\n%d\n" % (magic.encode(), im.size[0], im.size[1], maxval) + a.tobytes())


def png16_rgb(path, im):
    """A 16-bit RGB PNG (PIL cannot write one): samples v*257 + (x % 7)."""
    a = np.asarray(im, dtype=np.uint16) * 257
    a = a + (np.arange(a.shape[1], dtype=np.uint16)[None, :, None] % 7)
    raw = b"".join(b"\x00" + a[y].astype(">u2").tobytes() for y in range(a.shape[0]))
    ihdr = struct.pack(">IIBBBBB", a.shape[1], a.shape[0], 16, 2, 0, 0, 0)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def make_images(out):
    files = []
    def save(name, im, **kw):
        im.save(os.path.join(out, name), **kw)
        files.append(name)
    base = photo("Garden.jpg", 160, 120)
    save("rgb420.jpg", base, quality=90)
    save("rgb422_odd.jpg", photo("LadyBird.jpg", 131, 97), quality=90, subsampling=1)
    save("rgb444_tall.jpg", photo("Dune.jpg", 90, 150), quality=95, subsampling=0)
    save("gray.jpg", photo("Storm.jpg", 120, 100).convert("L"), quality=90)
    save("cmyk.jpg", photo("Aqua.jpg", 100, 80).convert("CMYK"), quality=90)
    save("progressive.jpg", photo("TwoWings.jpg", 140, 105), quality=85, progressive=True)
    save("restart.jpg", photo("RainDrops.jpg", 96, 128), quality=90, restart_marker_blocks=2)
    save("rgb.png", photo("Blinds.jpg", 100, 75))
    rgba = photo("FreshFlower.jpg", 80, 90).convert("RGBA")
    rgba.putalpha(Image.linear_gradient("L").resize((80, 90)))
    save("rgba.png", rgba)
    save("palette.png", photo("GreenMeadow.jpg", 90, 70).convert("P", palette=Image.ADAPTIVE, colors=64))
    pt = photo("Wood.jpg", 70, 90).convert("P", palette=Image.ADAPTIVE, colors=32)
    save("palette_trns.png", pt, transparency=3)
    save("gray.png", photo("YellowFlower.jpg", 75, 60).convert("L"))
    g16 = (np.asarray(photo("Storm.jpg", 64, 48).convert("L"), dtype=np.uint16) * 2).astype(np.uint16)
    save("gray16.png", Image.fromarray(g16, mode="I;16"))
    png16_rgb(os.path.join(out, "rgb16.png"), photo("Garden.jpg", 72, 54))
    files.append("rgb16.png")
    save("gray_alpha.png", photo("Dune.jpg", 60, 60).convert("LA"))
    # The rest of IMG_EXTENSIONS. Odd sizes: libwebp's chroma upsampling
    # has edge cases at the last row and column.
    save("lossy_odd.webp", photo("Garden.jpg", 67, 45), quality=80)
    wa = photo("FreshFlower.jpg", 50, 41).convert("RGBA")
    wa.putalpha(Image.linear_gradient("L").resize((50, 41)))
    save("lossy_alpha.webp", wa, quality=90)
    save("lossless.webp", photo("Wood.jpg", 40, 30), lossless=True)
    save("rgb.bmp", photo("LadyBird.jpg", 41, 30))
    save("rgb.tif", photo("Blinds.jpg", 40, 33))
    save("rgb.ppm", photo("Aqua.jpg", 43, 30))
    save("gray.pgm", photo("Storm.jpg", 40, 31).convert("L"))
    save("bitmap.pbm", photo("Dune.jpg", 45, 30).convert("1"))
    gray16 = Image.fromarray(np.asarray(photo("RainDrops.jpg", 40, 30).convert("L"), dtype=np.int32) * 2, mode="I")
    save("gray16.pgm", gray16)  # maxval 65535
    raw_pnm16(os.path.join(out, "rgb1000.ppm"), photo("TwoWings.jpg", 37, 29), "P6", 1000)
    files.append("rgb1000.ppm")
    plain_pnm(os.path.join(out, "plain100.ppm"), photo("GreenMeadow.jpg", 35, 27), "P3", 100)
    files.append("plain100.ppm")
    plain_pnm(os.path.join(out, "plain1000.pgm"), photo("YellowFlower.jpg", 33, 25).convert("L"), "P2", 1000)
    files.append("plain1000.pgm")
    plain_pnm(os.path.join(out, "plain.pbm"), photo("Garden.jpg", 31, 23).convert("L"), "P1", 1)
    files.append("plain.pbm")
    png16_gray_trns(os.path.join(out, "gray16_trns.png"), photo("Storm.jpg", 44, 30))
    files.append("gray16_trns.png")
    return files


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "vision/testdata"
    os.makedirs(os.path.join(out, "golden"), exist_ok=True)
    files = make_images(out)
    rng = random.Random(10)
    cases = []
    for name in files:
        img = Image.open(os.path.join(out, name)).convert("RGB")
        W, H = img.size
        geoms = [dict(kind="eval", resize=RESIZE, size=SIZE)]
        # boxes as RandomResizedCrop draws them, plus the whole image
        for k in range(3):
            top, left, h, w = torchvision.transforms.RandomResizedCrop.get_params(img, [0.08, 1.0], [3 / 4, 4 / 3])
            geoms.append(dict(kind="crop", box=[left, top, w, h], size=SIZE, flip=k == 1))
        geoms.append(dict(kind="crop", box=[0, 0, W, H], size=SIZE, flip=False))
        geoms.append(dict(kind="crop", box=[W // 8, H // 8, W // 4, H // 4], size=SIZE, flip=True))  # upscaling
        for i, g in enumerate(geoms):
            if g["kind"] == "eval":
                r = F.center_crop(F.resize(img, RESIZE), SIZE)
            else:
                x, y, w, h = g["box"]
                r = F.resized_crop(img, y, x, h, w, [SIZE, SIZE])
                if g["flip"]:
                    r = F.hflip(r)
            a = np.asarray(r, dtype=np.uint8)
            assert a.shape == (SIZE, SIZE, 3), a.shape
            g["file"] = name
            g["width"], g["height"] = W, H
            g["golden"] = "golden/%s.%d.u8" % (name, i)
            a.tofile(os.path.join(out, g["golden"]))
            cases.append(g)
    # ToTensor + Normalize, bits of torchvision's float32
    img = Image.open(os.path.join(out, "rgb420.jpg")).convert("RGB")
    t = F.normalize(F.to_tensor(F.center_crop(F.resize(img, RESIZE), SIZE)), MEAN, STD)
    t.numpy().astype("<f4").tofile(os.path.join(out, "golden", "rgb420.eval.f32"))
    manifest = dict(size=SIZE, resize=RESIZE, mean=MEAN, std=STD, cases=cases,
                    float32=dict(file="rgb420.jpg", golden="golden/rgb420.eval.f32"),
                    pil=Image.__version__, torchvision=torchvision.__version__)
    with open(os.path.join(out, "golden", "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    print("wrote %d images, %d goldens to %s" % (len(files), len(cases), out))


if __name__ == "__main__":
    torch.manual_seed(10)
    main()
