#!/usr/bin/env python3
"""The host's share of a training step's data: stringrt against PyTorch.

A device step waits for the host when the host's batch work (gathering the
images of a batch into floats, augmenting them, copying them into the
staging buffer) takes longer than the step. This times stringrt's
(`stringrt_host_batch_bench`: DataSet::batch fresh and recycled,
augmentImages, cpu::parallelCopy) on the CPU pool and, as the peer, the
same gather in PyTorch at its best (`index_select` of a uint8 tensor into a
kept buffer, then `copy_` into a kept float batch and `div_(255)`, torch's
own threads, the same thread count), at the same
shapes, and prints both and their ratio. Augmentation and the staging copy
have no peer here (torchvision is not installed; its transforms run per
sample in Python in a DataLoader worker).

    /usr/bin/python3 tests/bench/host_batch.py [--bench build/bin/stringrt_host_batch_bench]
        [--threads 2] [--rounds 5]
"""
import argparse
import subprocess
import sys
import time

SHAPES = [(1024, 1, 28, 28), (256, 3, 32, 32), (256, 3, 224, 224)]


def stringrt_times(bench, shape, threads, rounds):
    out = subprocess.run([bench, *map(str, shape), str(threads), str(rounds)], check=True,
                         capture_output=True, text=True).stdout
    return {k: float(v) for k, v in (line.split() for line in out.splitlines())}


def torch_gather_ms(shape, threads, rounds):
    import torch
    torch.set_num_threads(threads)
    b, c, h, w = shape
    images = torch.randint(0, 256, (2 * b, c, h, w), dtype=torch.uint8)
    index = (torch.arange(b) * 7919) % (2 * b)
    # At its best: into buffers kept from step to step, as stringrt's
    # recycled gather is (a fresh `images[index].float() / 255` is slower).
    picked = torch.empty((b, c, h, w), dtype=torch.uint8)
    batch = torch.empty((b, c, h, w), dtype=torch.float32)
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        torch.index_select(images, 0, index, out=picked)
        batch.copy_(picked).div_(255)
        best = min(best, (time.perf_counter() - start) * 1e3)
    return best


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bench", default="build/bin/stringrt_host_batch_bench")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=5)
    a = p.parse_args()
    print(f"host batch work, {a.threads} threads, best of {a.rounds} (ms)")
    print(f"{'batch':>20} {'torch gather':>13} {'gather':>8} {'recycled':>9} {'ratio':>6}"
          f" {'augment':>8} {'stage copy':>11} {'draw':>7}")
    for shape in SHAPES:
        ours = stringrt_times(a.bench, shape, a.threads, a.rounds)
        peer = torch_gather_ms(shape, a.threads, a.rounds)
        print(f"{str(list(shape)):>20} {peer:13.2f} {ours['gather_fresh']:8.2f}"
              f" {ours['gather_recycled']:9.2f} {peer / ours['gather_recycled']:5.2f}x"
              f" {ours['augment']:8.2f} {ours['stage_copy']:11.2f} {ours['draw']:7.3f}")
    print("ratio: torch's gather time over stringrt's recycled gather (the trainer's); > 1 is faster")
    print("draw: the augmentation's parameters alone, the host's share when a device augments")
    return 0


if __name__ == "__main__":
    sys.exit(main())
