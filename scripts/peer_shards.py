#!/usr/bin/python3
"""PyTorch's DataLoader on WebDataset tar shards, the way WebDataset reads
them: the peer of the shard rows of make bench (bench/sources.go). Prints
one JSON record. Run with Debian's /usr/bin/python3 (python3-pil,
python3-torchvision, python3-torch); it needs no webdataset package.

    peer_shards.py loader DIR --workers W     every DIR/*.tar, fork, persistent, batch 32

The dataset is a torch.utils.data.IterableDataset: each epoch the shard
list is shuffled (the same order in every worker), each worker takes every
num_workers-th shard from its id (get_worker_info(), as WebDataset's
split_by_worker does), streams its tars with tarfile, groups members into
samples by key (the name up to its first dot), passes them through a
shuffle buffer of 64 (WebDataset's shuffle(64)) and applies torchvision's
training transform (RandomResizedCrop(224), RandomHorizontalFlip,
ToTensor, Normalize) to the .jpg, the label from the .cls.
"""
import argparse
import glob
import io
import json
import os
import random
import resource
import sys
import tarfile
import time

import torch
from PIL import Image
from torch.utils.data import IterableDataset, get_worker_info
from torchvision import transforms

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def train_tf(size):
    return transforms.Compose([transforms.RandomResizedCrop(size), transforms.RandomHorizontalFlip(),
                               transforms.ToTensor(), transforms.Normalize(MEAN, STD)])


def tar_samples(path):
    """The samples of one tar shard, as dicts of member extension -> bytes."""
    key, sample = None, {}
    with tarfile.open(path, mode="r|") as tf:  # streamed, as from a URL
        for m in tf:
            if not m.isfile():
                continue
            base = os.path.basename(m.name)
            k, _, ext = base.partition(".")
            if k != key and sample:
                yield sample
                sample = {}
            key = k
            sample[ext.lower()] = tf.extractfile(m).read()
    if sample:
        yield sample


class TarShards(IterableDataset):
    def __init__(self, shards, transform, buffer=64, seed=0):
        self.shards, self.transform, self.buffer, self.seed = shards, transform, buffer, seed
        self.epoch = -1  # each (persistent) worker counts its own epochs

    def __iter__(self):
        self.epoch += 1
        info = get_worker_info()
        wid, nw = (info.id, info.num_workers) if info is not None else (0, 1)
        order = list(self.shards)
        random.Random(self.seed + self.epoch).shuffle(order)
        rng = random.Random((self.seed + self.epoch) * 1000 + wid)
        buf = []
        for path in order[wid::nw]:
            for s in tar_samples(path):
                buf.append(s)
                if len(buf) < self.buffer:
                    continue
                yield self.decode(buf.pop(rng.randrange(len(buf))))
        rng.shuffle(buf)
        for s in buf:
            yield self.decode(s)

    def decode(self, s):
        img = Image.open(io.BytesIO(s["jpg"])).convert("RGB")
        return self.transform(img), int(s["cls"])


def worker_init(_):
    torch.set_num_threads(1)


def rss_mb(workers):
    """Peak RSS: this process plus, as an upper bound, workers x the largest child."""
    self_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    child_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return (self_kb + workers * child_kb) / 1024


def loader(a):
    torch.set_num_threads(1)
    shards = sorted(glob.glob(os.path.join(a.dir, "*.tar")))
    if not shards:
        sys.exit("no *.tar in %s" % a.dir)
    ds = TarShards(shards, train_tf(a.size))
    kw = {}
    if a.workers > 0:
        import multiprocessing as mp
        kw = dict(multiprocessing_context=mp.get_context("fork"), persistent_workers=True, prefetch_factor=2,
                  worker_init_fn=worker_init)
    dl = torch.utils.data.DataLoader(ds, batch_size=a.batch, drop_last=True, num_workers=a.workers,
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
    return dict(mode="loader", workers=a.workers, shards=len(shards), epochs=epochs, images_per_s=rate,
                first_batch_s=epochs[0]["first_batch_s"], peak_rss_mb=rss_mb(a.workers),
                version=torch.__version__)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["loader"])
    p.add_argument("dir")
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--epochs", type=int, default=3)
    a = p.parse_args()
    out = dict(loader=loader)[a.mode](a)
    out.update(python=sys.version.split()[0], cpus=os.cpu_count())
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
