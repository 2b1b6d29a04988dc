"""Philox4x32-10 (Salmon et al., SC 2011; Random123's philox4x32_R) in NumPy,
vectorised over arrays of counters: the oracle of runtime/include/stringrt/
Philox.h and of the masks built on it (DropoutMask.h)."""

import numpy as np

M0, M1 = 0xD2511F53, 0xCD9E8D57  # round multipliers
W0, W1 = 0x9E3779B9, 0xBB67AE85  # key schedule increments
MASK32 = 0xFFFFFFFF


def block(counter, key):
    """The four 32-bit words (uint64 arrays) of the block at `counter` (four
    integers or arrays, broadcast together) under `key` (two integers)."""
    c0, c1, c2, c3 = (np.asarray(c, dtype=np.uint64) & np.uint64(MASK32) for c in counter)
    k0, k1 = (int(k) & MASK32 for k in key)
    for r in range(10):
        if r > 0:
            k0, k1 = (k0 + W0) & MASK32, (k1 + W1) & MASK32
        p0 = c0 * np.uint64(M0)  # < 2^64: no wrap
        p1 = c2 * np.uint64(M1)
        hi0, lo0 = p0 >> np.uint64(32), p0 & np.uint64(MASK32)
        hi1, lo1 = p1 >> np.uint64(32), p1 & np.uint64(MASK32)
        c0, c1, c2, c3 = hi1 ^ c1 ^ np.uint64(k0), lo1, hi0 ^ c3 ^ np.uint64(k1), lo0
    return c0, c1, c2, c3


def uniform(word):
    """In [0, 1) from the top 24 bits (Philox.h's uniformFloat), as float64."""
    return (np.asarray(word, dtype=np.uint64) >> np.uint64(8)).astype(np.float64) / 16777216.0
