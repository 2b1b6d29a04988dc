"""Writes a tiny MNIST-layout IDX data set for the stringrun tests.

make_tiny_idx.py DIR: 4x4 images of 3 classes (class c is bright in row c,
with a deterministic speckle), 12 train and 6 test images, uncompressed.
"""
import os
import struct
import sys


def images(count, seed):
    data, labels = bytearray(), bytearray()
    for i in range(count):
        c = i % 3
        labels.append(c)
        for r in range(4):
            for col in range(4):
                speckle = (seed * 31 + i * 17 + r * 5 + col * 3) % 40
                data.append(200 + speckle if r == c else speckle)
    return data, labels


def write(directory, prefix, count, seed):
    data, labels = images(count, seed)
    with open(os.path.join(directory, prefix + "-images-idx3-ubyte"), "wb") as f:
        f.write(struct.pack(">IIII", 0x803, count, 4, 4) + bytes(data))
    with open(os.path.join(directory, prefix + "-labels-idx1-ubyte"), "wb") as f:
        f.write(struct.pack(">II", 0x801, count) + bytes(labels))


def main():
    directory = sys.argv[1]
    os.makedirs(directory, exist_ok=True)
    write(directory, "train", 12, 1)
    write(directory, "t10k", 6, 2)


if __name__ == "__main__":
    main()
