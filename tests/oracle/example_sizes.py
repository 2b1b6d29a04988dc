"""The compile options under which the oracle tests check each example.

The ViT-S- and ViT-B-sized examples are checked with one encoder block
(`-D depth=1`) instead of twelve: the block's shapes (width 384 or 768,
head dim 64, 197 tokens) and every op are the full model's, only the count
of identical blocks drops, which made them most of the oracle tests' time
(float64 interpretation of @gradients on 2 cores: ~55 s a kernel set for
vit_s_rope at depth 12). It also keeps the interpreter's check that a model
starts near chance (test_ir_interpreter: |loss - log classes| < 0.3 on a
batch of 2 random images) a check of the initialisers, not of one draw:
vit_b_rope at depth 12 drew 1.90 against log 10 = 2.30, at depth 1 2.43.
Everything else compiles as written.
"""
import os

CHECK_DEFINES = {
    "vit_s_rope.pe": ["-D", "depth=1"],
    "vit_b_rope.pe": ["-D", "depth=1"],
}


def check_defines(example):
    """The `-D NAME=VALUE` options to compile `example` with for a check."""
    return list(CHECK_DEFINES.get(os.path.basename(example), []))
