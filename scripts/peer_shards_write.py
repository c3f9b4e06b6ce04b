#!/usr/bin/python3
"""The peer of `tensorbatch shards write` in bench/RESULTS.md (issue 38):
a single-process Python loop that writes the same ImageFolder into
WebDataset tars with tarfile, copying each image as it is (copy), or
opening it with PIL, resizing it so its shorter side is at most N
(bilinear) and saving it as a JPEG of quality Q (resize), as img2dataset
does. It prints one JSON line: images, bytes, seconds, images/s, MB/s.

    /usr/bin/python3 scripts/peer_shards_write.py SRC OUT copy
    /usr/bin/python3 scripts/peer_shards_write.py SRC OUT resize --size 256 --quality 90
"""
import argparse
import io
import json
import os
import tarfile
import time

from PIL import Image


def images(src):
    classes = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
    for label, c in enumerate(classes):
        for f in sorted(os.listdir(os.path.join(src, c))):
            yield os.path.join(src, c, f), label


def add(tf, name, data):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tf.addfile(info, io.BytesIO(data))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("out")
    ap.add_argument("mode", choices=["copy", "resize"])
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--quality", type=int, default=90)
    ap.add_argument("--shard-bytes", type=int, default=256 << 20)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    start = time.perf_counter()
    n, total, shard, tf, written = 0, 0, 0, None, 0
    for path, label in images(a.src):
        if tf is None:
            tf = tarfile.open(os.path.join(a.out, "shard-%06d.tar" % shard), "w")
        if a.mode == "copy":
            with open(path, "rb") as f:
                data = f.read()
        else:
            img = Image.open(path).convert("RGB")
            w, h = img.size
            s = min(w, h)
            if s > a.size:
                img = img.resize((max(1, w * a.size // s), max(1, h * a.size // s)), Image.BILINEAR)
            buf = io.BytesIO()
            img.save(buf, "JPEG", quality=a.quality)
            data = buf.getvalue()
        key = "%09d" % n
        add(tf, key + ".jpg", data)
        add(tf, key + ".cls", str(label).encode())
        n += 1
        total += len(data)
        written += 1024 + len(data)
        if written >= a.shard_bytes:
            tf.close()
            tf, shard, written = None, shard + 1, 0
    if tf is not None:
        tf.close()
    sec = time.perf_counter() - start
    print(json.dumps({"images": n, "bytes": total, "seconds": sec, "images_per_s": n / sec, "mb_per_s": total / sec / 1e6}))


main()
