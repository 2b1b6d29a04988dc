"""The hoisted and fused ops of pe_torch (rope_table, rope_apply,
cayley_weight, rope_attention, linear_gelu, linear_residual) against the
compositions of ordinary ops they replace, and their backward formulas in
pe_torch_grad against torch.autograd, in float64."""

import os
import sys
import unittest

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pe_torch as pt  # noqa: E402
import pe_torch_grad as pg  # noqa: E402

torch.set_num_threads(1)
D64 = torch.float64


def randn(*shape, seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=D64)


def vjp(fn, inputs, dy):
    leaves = [t.detach().clone().requires_grad_() for t in inputs]
    grads = torch.autograd.grad(fn(*leaves), leaves, dy, allow_unused=True)
    return [torch.zeros_like(t) if g is None else g for t, g in zip(leaves, grads)]


class FusedOps(unittest.TestCase):
    def close(self, got, want, tol=1e-11):
        self.assertEqual(tuple(got.shape), tuple(want.shape))
        err = (got - want).abs().max().item()
        self.assertLessEqual(err, tol * max(1.0, want.abs().max().item()))

    def test_rope_table_and_apply_are_rope(self):
        for axes in (1, 2):
            x, pos, freqs = randn(2, 5, 8, seed=1), randn(5, axes, seed=2), randn(4, axes, seed=3)
            table = pt.rope_table(pos, freqs)
            self.close(pt.rope_apply(x, table), pt.rope(x, pos, freqs))
            self.close(pt.rope_apply(x, table, inverse=True), pt.rope(x, pos, -freqs))

    def test_rope_table_grad(self):
        pos, freqs, dy = randn(5, 2, seed=4), randn(4, 2, seed=5), randn(5, 4, 2, seed=6)
        _, want = vjp(pt.rope_table, [pos, freqs], dy)
        self.close(pg.rope_table_grad(pos, freqs, dy), want)

    def test_rope_apply_grads(self):
        for inverse in (False, True):
            x, table, dy = randn(3, 4, 6, seed=7), randn(4, 3, 2, seed=8), randn(3, 4, 6, seed=9)
            dx, dtable = vjp(lambda a, b: pt.rope_apply(a, b, inverse), [x, table], dy)
            self.close(pt.rope_apply(dy, table, inverse=not inverse), dx)
            self.close(pg.rope_apply_grad_table(x, dy, inverse), dtable)

    def test_cayley_weight(self):
        x, s = randn(2, 5, 6, seed=10), 0.2 * randn(6, 6, seed=11)  # not skew
        self.close(x @ pt.cayley_weight(s), pt.cayley(x, s))
        dw = randn(6, 6, seed=12)
        (want,) = vjp(pt.cayley_weight, [s], dw)
        self.close(pg.cayley_weight_grad(s, dw), want)

    def test_rope_attention(self):
        for mask in ("none", "causal"):
            q, k, v = randn(2, 5, 8, seed=13), randn(2, 5, 8, seed=14), randn(2, 5, 8, seed=15)
            table = pt.rope_table(randn(5, 2, seed=16), randn(4, 2, seed=17))
            fused = lambda a, b, c: pt.rope_attention(a, b, c, table, 2, 0.6, mask)  # noqa: E731
            want = pt.attention(pt.rope_apply(q, table), pt.rope_apply(k, table), v, 2, 0.6, mask)
            self.close(fused(q, k, v), want)
            dy = randn(2, 5, 8, seed=18)
            y, lse = pt.rope_attention(q, k, v, table, 2, 0.6, mask, return_lse=True)
            self.close(y, want)
            got = pg.rope_attention_grad(q, k, v, table, y, lse, dy, 2, 0.6, mask)
            for g, w in zip(got, vjp(fused, [q, k, v], dy)):
                self.close(g, w)
        with self.assertRaises(ValueError):
            pt.rope_attention(q, k, v, table, 2, 0.6, "skip")

    def test_epilogues(self):
        x, w, b = randn(2, 3, 4, seed=19), randn(4, 5, seed=20), randn(5, seed=21)
        for approximate in (False, True):
            y, pre = pt.linear_gelu(x, w, b, approximate)
            self.close(pre, pt.linear(x, w, b))
            self.close(y, pt.gelu(pt.linear(x, w, b), approximate))
        r = randn(2, 3, 5, seed=22)
        self.close(pt.linear_residual(r, x, w, b), r + pt.linear(x, w, b))
        self.close(pt.linear_residual(r, x, w), r + pt.linear(x, w))


if __name__ == "__main__":
    unittest.main()
