#!/usr/bin/python3
"""PyTorch's DataLoader on tensorbatch's bench workload: the peer of make bench.

One configuration per process, so that peak RSS and start-up are its own.
Prints one JSON record on stdout. Run with Debian's /usr/bin/python3, where
python3-torch is installed.

Workload (the ROCm guide's): n samples of torch.randn(3,224,224) and a label,
batch 32, drop_last, a training step simulated by waiting --step seconds per
batch (a GPU step leaves the CPU free), torch.set_num_threads(1) in workers.
"""
import argparse
import json
import multiprocessing as mp
import os
import resource
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset


class Randn(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return torch.randn(3, 224, 224), torch.tensor(i % 10)


def worker_init(_):
    torch.set_num_threads(1)


def context(method):
    if method == "forkserver-preload":
        # Python 3.11's forkserver does not preload the main module: without
        # this, every worker imports torch itself.
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(["torch"])
        return ctx
    return mp.get_context(method)


def rss_mb(workers):
    """Peak RSS: this process plus, as an upper bound, workers x the largest child."""
    self_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    child_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return (self_kb + workers * child_kb) / 1024


def run(a):
    torch.set_num_threads(1)
    pin = torch.cuda.is_available()  # with no CUDA, pin_memory=True is silently ignored
    kw = {}
    if a.workers > 0:
        kw = dict(
            multiprocessing_context=context(a.method),
            persistent_workers=a.persistent,
            prefetch_factor=2,
            worker_init_fn=worker_init,
        )
    loader = DataLoader(Randn(a.samples), batch_size=a.batch, drop_last=True,
                        num_workers=a.workers, pin_memory=pin, **kw)
    epochs = []
    for _ in range(a.epochs):
        t0 = time.perf_counter()
        first = last = None
        n = 0
        it = iter(loader)  # starts the workers, unless they persist
        for x, y in it:
            now = time.perf_counter()
            if first is None:
                first = now - t0
            if pin:
                x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
            time.sleep(a.step)
            n += 1
            last = time.perf_counter()
        del it  # per-epoch workers are shut down here, inside the epoch's time
        wall = time.perf_counter() - t0
        epochs.append(dict(wall_s=wall, first_batch_s=first, steady_s=last - t0 - first, batches=n))
    return dict(loader="pytorch", version=torch.__version__, method=a.method if a.workers else "main",
                workers=a.workers, persistent=a.persistent, step_s=a.step, epochs=epochs,
                peak_rss_mb=rss_mb(a.workers), pin_memory=pin,
                python=sys.version.split()[0], cpus=os.cpu_count())


def plain(a):
    """The same per-sample work in a plain loop on one core: no loader at all."""
    torch.set_num_threads(1)
    ds = Randn(a.samples)
    for i in range(4):  # warm-up
        ds[i]
    n = 0
    t0 = time.perf_counter()
    while n < a.samples or time.perf_counter() - t0 < 0.5:
        ds[n % a.samples]
        n += 1
    wall = time.perf_counter() - t0
    return dict(loader="pytorch", plain=True, samples=n, wall_s=wall,
                batches_per_s=n / a.batch / wall, version=torch.__version__)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--samples", type=int, default=1000)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--method", default="fork", choices=["fork", "spawn", "forkserver", "forkserver-preload"])
    p.add_argument("--persistent", type=int, default=1)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--step", type=float, default=0.02)
    p.add_argument("--plain", action="store_true")
    a = p.parse_args()
    a.persistent = bool(a.persistent)
    print(json.dumps(plain(a) if a.plain else run(a)), flush=True)


if __name__ == "__main__":  # required: spawn and forkserver re-import this module
    main()
