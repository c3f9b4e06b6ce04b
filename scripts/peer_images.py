#!/usr/bin/python3
"""PIL, torchvision and PyTorch's DataLoader on a folder of images: the peer
of the image rows of make bench (bench/images.go). One measurement per
process; prints one JSON record. Run with Debian's /usr/bin/python3
(python3-pil, python3-torchvision, python3-torch).

    peer_images.py decode ROOT [--limit N]        PIL decode only (from memory)
    peer_images.py transform ROOT [--eval]        torchvision's transform, plain loop, one core
    peer_images.py loader ROOT --workers W        DataLoader + ImageFolder, fork, persistent, batch 32
"""
import argparse
import io
import json
import os
import resource
import sys
import time

import torch
from PIL import Image
from torchvision import datasets, transforms

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def train_tf(size):
    return transforms.Compose([transforms.RandomResizedCrop(size), transforms.RandomHorizontalFlip(),
                               transforms.ToTensor(), transforms.Normalize(MEAN, STD)])


def eval_tf(size):
    return transforms.Compose([transforms.Resize(int(size / 0.875)), transforms.CenterCrop(size),
                               transforms.ToTensor(), transforms.Normalize(MEAN, STD)])


def files(root, limit):
    ds = datasets.ImageFolder(root)
    paths = [p for p, _ in ds.samples]
    return paths[:limit] if limit > 0 else paths


def blocks(items, one, a):
    """The rate of one() over items as the bench measures every per-core
    rate: blocks of --block items, each timed --reps times, the fastest
    pass of each block summed (a noisy machine only ever adds time)."""
    for x in items[:8]:  # warm-up
        one(x)
    total = 0.0
    for i in range(0, len(items), a.block):
        best = None
        for _ in range(a.reps):
            t0 = time.perf_counter()
            for x in items[i:i + a.block]:
                one(x)
            dt = time.perf_counter() - t0
            best = dt if best is None else min(best, dt)
        total += best
    return len(items) / total, total


def decode(a):
    blobs = [open(p, "rb").read() for p in files(a.root, a.limit)]
    rate, wall = blocks(blobs, lambda b: Image.open(io.BytesIO(b)).load(), a)
    return dict(mode="decode", images=len(blobs), wall_s=wall, images_per_s=rate)


def transform(a):
    torch.set_num_threads(1)
    paths = files(a.root, a.limit)
    tf = eval_tf(a.size) if a.eval else train_tf(a.size)
    loader = datasets.folder.default_loader
    rate, wall = blocks(paths, lambda p: tf(loader(p)), a)
    return dict(mode="eval" if a.eval else "transform", images=len(paths), wall_s=wall, images_per_s=rate)


def worker_init(_):
    torch.set_num_threads(1)


def rss_mb(workers):
    """Peak RSS: this process plus, as an upper bound, workers x the largest child."""
    self_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    child_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return (self_kb + workers * child_kb) / 1024


def loader(a):
    torch.set_num_threads(1)
    ds = datasets.ImageFolder(a.root, transform=train_tf(a.size))
    if a.limit > 0:
        ds = torch.utils.data.Subset(ds, range(min(a.limit, len(ds))))
    kw = {}
    if a.workers > 0:
        import multiprocessing as mp
        kw = dict(multiprocessing_context=mp.get_context("fork"), persistent_workers=True, prefetch_factor=2,
                  worker_init_fn=worker_init)
    dl = torch.utils.data.DataLoader(ds, batch_size=a.batch, shuffle=True, drop_last=True, num_workers=a.workers,
                                     pin_memory=torch.cuda.is_available(), **kw)
    epochs = []
    for _ in range(a.epochs):
        t0 = time.perf_counter()
        first, n = None, 0
        for x, y in dl:
            if first is None:
                first = time.perf_counter() - t0
            n += x.shape[0]
        epochs.append(dict(wall_s=time.perf_counter() - t0, first_batch_s=first, images=n))
    # the steady rate: the best epoch after the first (which starts the workers)
    rate = max(e["images"] / e["wall_s"] for e in epochs[1:])
    return dict(mode="loader", workers=a.workers, epochs=epochs, images_per_s=rate,
                first_batch_s=epochs[0]["first_batch_s"], peak_rss_mb=rss_mb(a.workers),
                version=torch.__version__)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["decode", "transform", "loader"])
    p.add_argument("root")
    p.add_argument("--limit", type=int, default=0)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--eval", action="store_true")
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--block", type=int, default=25)
    p.add_argument("--reps", type=int, default=3)
    a = p.parse_args()
    out = dict(decode=decode, transform=transform, loader=loader)[a.mode](a)
    out.update(python=sys.version.split()[0], cpus=os.cpu_count())
    print(json.dumps(out), flush=True)


if __name__ == "__main__":  # fork re-imports nothing, but keep the guard
    main()
