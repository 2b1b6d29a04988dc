"""Writes a tiny Fashion-MNIST-shaped IDX data set (uncompressed): 4 train
and 2 test 28x28 images with labels, into the directory argv[1]."""
import os
import struct
import sys


def write(directory, prefix, count):
    images = struct.pack(">IIII", 0x803, count, 28, 28)
    images += bytes((i * 31 + p * 7) % 256 for i in range(count) for p in range(28 * 28))
    labels = struct.pack(">II", 0x801, count) + bytes(i % 10 for i in range(count))
    with open(os.path.join(directory, prefix + "-images-idx3-ubyte"), "wb") as f:
        f.write(images)
    with open(os.path.join(directory, prefix + "-labels-idx1-ubyte"), "wb") as f:
        f.write(labels)


os.makedirs(sys.argv[1], exist_ok=True)
write(sys.argv[1], "train", 4)
write(sys.argv[1], "t10k", 2)
