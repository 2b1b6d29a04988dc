"""Writes the bytes of a file as a .npy of int32 token ids, by hand.

make_tokens_npy.py TEXT OUT.npy [TOKEN...]: the tokens stringrun reads from
TEXT as a byte-level corpus, as an array file (docs/data.md), then the
extra TOKENs.
"""
import struct
import sys


def main():
    with open(sys.argv[1], "rb") as f:
        data = list(f.read()) + [int(t) for t in sys.argv[3:]]
    header = "{'descr': '<i4', 'fortran_order': False, 'shape': (%d,), }" % len(data)
    header += " " * (-(10 + len(header) + 1) % 64) + "\n"
    with open(sys.argv[2], "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        f.write(struct.pack("<%di" % len(data), *data))


if __name__ == "__main__":
    main()
