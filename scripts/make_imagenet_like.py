#!/usr/bin/python3
"""An ImageNet-like folder of real-photo JPEGs, made from Debian's
mate-backgrounds (run with /usr/bin/python3, which has python3-pil).

    /usr/bin/python3 scripts/make_imagenet_like.py OUT [-n 1000] [--seed 1] [--hires]

Ten classes, one per photo of /usr/share/backgrounds/mate/nature (the
first ten by name); each image is a random crop of its class's photo at a
random zoom, resized to one of ImageNet's usual sizes (500x375 most
often), maybe mirrored, saved at quality 90 (4:2:0, as ImageNet's JPEGs
mostly are) as OUT/<class>/<class>_<i>.JPEG. Deterministic: the same
seed and packages give the same bytes. A folder that already holds the
same recipe is left as it is.

With --hires the set is high-resolution instead (issue 23): the longer
side 640-1280 px (at 4:3, 3:2, 16:9, 1:1 or portrait), half the images
4:4:4 and half 4:2:0, one in four progressive, at quality 90.
"""
import argparse
import json
import os
import random
import sys

from PIL import Image

PHOTOS = "/usr/share/backgrounds/mate/nature"
# (width, height) and weight: ImageNet's commonest sizes
SIZES = [((500, 375), 40), ((500, 333), 15), ((375, 500), 15), ((500, 400), 8),
         ((400, 500), 5), ((500, 500), 7), ((333, 500), 5), ((640, 480), 5)]
# --hires: the longer side, and the aspect ratios (width / height)
HIRES_LONG = [640, 720, 800, 960, 1024, 1152, 1280]
HIRES_ASPECT = [4 / 3, 4 / 3, 3 / 2, 16 / 9, 1.0, 3 / 4, 2 / 3]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("-n", type=int, default=1000, help="images in all")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--quality", type=int, default=90)
    p.add_argument("--hires", action="store_true", help="640-1280 px, mixed 4:2:0 and 4:4:4, some progressive")
    a = p.parse_args()
    recipe = dict(n=a.n, seed=a.seed, quality=a.quality, version=1)
    if a.hires:
        recipe["hires"] = 1
    stamp = os.path.join(a.out, ".recipe.json")
    if os.path.exists(stamp) and json.load(open(stamp)) == recipe:
        print("%s: already made" % a.out)
        return
    names = sorted(f for f in os.listdir(PHOTOS) if f.lower().endswith(".jpg"))[:10]
    if len(names) < 10:
        sys.exit("need 10 photos in %s (Debian's mate-backgrounds)" % PHOTOS)
    rng = random.Random(a.seed)
    photos = [Image.open(os.path.join(PHOTOS, n)).convert("RGB") for n in names]
    classes = [os.path.splitext(n)[0].lower() for n in names]
    for c in classes:
        os.makedirs(os.path.join(a.out, c), exist_ok=True)
    sizes = [s for s, w in SIZES for _ in range(w)]
    for i in range(a.n):
        k = i % 10
        src = photos[k]
        W, H = src.size
        save = dict(quality=a.quality)
        if a.hires:
            long, aspect = rng.choice(HIRES_LONG), rng.choice(HIRES_ASPECT)
            w, h = (long, round(long / aspect)) if aspect >= 1 else (round(long * aspect), long)
            fit = min(W / w, H / h, 1.0)  # a photo smaller than the size: keep the aspect, shrink
            w, h = int(w * fit), int(h * fit)
            save.update(subsampling=0 if rng.random() < 0.5 else 2, progressive=rng.random() < 0.25)
        else:
            w, h = rng.choice(sizes)
        zoom = rng.uniform(1.0, min(W / w, H / h))  # source pixels per output pixel
        cw, ch = int(w * zoom), int(h * zoom)
        x, y = rng.randrange(W - cw + 1), rng.randrange(H - ch + 1)
        im = src.crop((x, y, x + cw, y + ch)).resize((w, h), Image.LANCZOS)
        if rng.random() < 0.5:
            im = im.transpose(Image.FLIP_LEFT_RIGHT)
        im.save(os.path.join(a.out, classes[k], "%s_%05d.JPEG" % (classes[k], i)), **save)
    json.dump(recipe, open(stamp, "w"))
    print("%s: %d JPEGs in %d classes" % (a.out, a.n, len(classes)))


if __name__ == "__main__":
    main()
