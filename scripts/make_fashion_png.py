#!/usr/bin/python3
"""Fashion-MNIST as a folder of PNGs, from Debian's dataset-fashion-mnist
(run with /usr/bin/python3, which has python3-pil).

    /usr/bin/python3 scripts/make_fashion_png.py OUT [--limit N]

Writes OUT/train/<class>/<i>.png (60,000) and OUT/test/<class>/<i>.png
(10,000): 28x28 grayscale, class folders named as torchvision's
FashionMNIST.classes ("/" becomes "_"), so vision.ImageFolder(OUT/train)
numbers them as the dataset does. --limit keeps the first N of each split.
"""
import argparse
import gzip
import json
import os
import struct

from PIL import Image

SRC = "/usr/share/datasets/fashion-mnist"
CLASSES = ["T-shirt_top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"]


def idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, n = struct.unpack(">II", data[:8])
    if magic == 2051:
        rows, cols = struct.unpack(">II", data[8:16])
        return [data[16 + i * rows * cols:16 + (i + 1) * rows * cols] for i in range(n)], (cols, rows)
    return list(data[8:8 + n]), None


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--limit", type=int, default=0)
    a = p.parse_args()
    recipe = dict(limit=a.limit, version=1)
    stamp = os.path.join(a.out, ".recipe.json")
    if os.path.exists(stamp) and json.load(open(stamp)) == recipe:
        print("%s: already made" % a.out)
        return
    total = 0
    for split, prefix in (("train", "train"), ("test", "t10k")):
        images, size = idx(os.path.join(SRC, prefix + "-images-idx3-ubyte.gz"))
        labels, _ = idx(os.path.join(SRC, prefix + "-labels-idx1-ubyte.gz"))
        n = len(images) if a.limit <= 0 else min(a.limit, len(images))
        for c in CLASSES:
            os.makedirs(os.path.join(a.out, split, c), exist_ok=True)
        for i in range(n):
            Image.frombytes("L", size, images[i]).save(os.path.join(a.out, split, CLASSES[labels[i]], "%05d.png" % i))
        total += n
    json.dump(recipe, open(stamp, "w"))
    print("%s: %d PNGs" % (a.out, total))


if __name__ == "__main__":
    main()
