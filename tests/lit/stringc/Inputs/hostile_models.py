"""Writes the hostile .pe files of hostile-input.test into DIR.

hostile_models.py DIR: deep.pe (a sum of 40,000 terms), blocks.pe (10,000
blocks, each using the next), rank9.pe (a parameter of rank 9), bigparam.pe
(a parameter of 2^32 + 65536 elements), manyparams.pe (parameters of 2^32
elements in all, plus one), biginput.pe (an input of more than 2^32
elements per example).
"""
import os
import sys

HEAD = """model hostile
const D = 8
input image: f32[B, 1, 4, 4]
input label: i32[B]
param w_patch: [16, D] = normal(std = 0.3, seed = 1)
param b_patch: [D] = zeros
param w_head: [D, 3] = normal(std = 0.3, seed = 2)
{extra}let x = select_token(patch_embed(image, w_patch, b_patch, patch = 4), index = 0)
"""
TAIL = """output logits = linear(h, w_head)
loss cross_entropy(logits, label)
optimizer adamw(lr = 0.05)
"""


def model(extra="", body="let h = x\n"):
    return HEAD.format(extra=extra) + body + TAIL


def main(out):
    os.makedirs(out, exist_ok=True)
    blocks = "".join(f"block b{i}(v) {{\n  return b{i + 1}(v)\n}}\n" for i in range(10000))
    blocks += "block b10000(v) {\n  return v\n}\n"
    files = {
        "deep.pe": model(body="let h = " + " + ".join(["x"] * 40000) + "\n"),
        "blocks.pe": model(extra=blocks, body="let h = b0(x)\n"),
        "rank9.pe": model(extra="param big: [2, 2, 2, 2, 2, 2, 2, 2, 2] = zeros\n"),
        "bigparam.pe": model(extra="param big: [65536, 65537] = zeros\n"),
        "manyparams.pe": model(extra="param p1: [65536, 32768] = zeros\n"
                                     "param p2: [65536, 32768] = zeros\n"),
        "biginput.pe": model(extra="input huge: f32[B, 100000, 100000, 1000]\n"),
    }
    for name, text in files.items():
        with open(os.path.join(out, name), "w") as f:
            f.write(text)


if __name__ == "__main__":
    main(sys.argv[1])
