"""Checks every backward op of pe_torch_grad (explicit formulas) against
torch.autograd.grad of the corresponding forward function of pe_torch, in
float64 on small random shapes, for every mode and mask. Also checks the
forward-op VJPs that docs/autodiff.md states (rope by the opposite angle,
householder with swapped frequencies)."""

import math
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
    """Standard normal float64 values of `shape` (randn(seed=s) is a scalar)."""
    if len(shape) == 1 and isinstance(shape[0], tuple):
        shape = shape[0]
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=D64)


def vjp(fn, inputs, dy):
    """The gradients of <fn(*inputs), dy> with respect to every input
    (zeros where the output does not depend on it)."""
    leaves = [t.detach().clone().requires_grad_() for t in inputs]
    out = fn(*leaves)
    grads = torch.autograd.grad(out, leaves, dy, allow_unused=True)
    return [torch.zeros_like(t) if g is None else g for t, g in zip(leaves, grads)]


class Case(unittest.TestCase):
    def close(self, got, want, tol=1e-10):
        """Same shape, max |got - want| <= tol * max(1, max |want|)."""
        self.assertEqual(tuple(got.shape), tuple(want.shape))
        self.assertEqual(got.dtype, D64)
        if not want.numel():
            return
        err = (got - want).abs().max().item()
        size = max(1.0, want.abs().max().item())
        self.assertLessEqual(err, tol * size, f"max abs error {err} (max |want| {size})")

    def nonzero(self, t):
        self.assertGreater(t.abs().max().item(), 1e-6)

    def zero(self, t):
        """Exact zeros, not merely small values."""
        self.assertTrue(torch.equal(t, torch.zeros_like(t)))


# ------------------------------------------------------------ broadcasting --

class TestBroadcasting(Case):
    def test_sum_to(self):
        for shape, small in [((2, 3, 4), (3, 4)), ((2, 3, 4), (4,)), ((2, 3), ()),
                             ((3, 4), (3, 4))]:
            with self.subTest(shape=shape, to=small):
                x, dy = randn(*small, seed=1), randn(*shape, seed=2)
                (want,) = vjp(lambda t: pt.add(torch.zeros(shape, dtype=D64), t), [x], dy)
                self.close(pg.sum_to(dy, small), want)

    def test_broadcast_to(self):
        x = randn(2, 3, 4, seed=3)
        for axis_dims, dy in [((0, 1, 2), randn(seed=4)), ((0,), randn(3, 4, seed=5)),
                              ((0, 1), randn(4, seed=6))]:
            with self.subTest(dims=axis_dims):
                n = math.prod(x.shape[d] for d in axis_dims)
                (want,) = vjp(lambda t: t.sum(dim=axis_dims), [x], dy)
                self.close(pg.broadcast_to(dy, x.shape), want)
                if axis_dims == (0, 1, 2):
                    (mean,) = vjp(pt.mean, [x], dy)
                    self.close(pg.broadcast_to(dy, x.shape) / n, mean)
        with self.assertRaises(ValueError):
            pg.broadcast_to(randn(3, seed=7), (2, 4))

    def test_expand_axis(self):
        x = randn(2, 3, 4, seed=8)
        for axis in range(3):
            with self.subTest(axis=axis):
                dy = randn(*[s for d, s in enumerate(x.shape) if d != axis], seed=9 + axis)
                (want,) = vjp(lambda t: pt.mean(t, axis), [x], dy)
                self.close(pg.expand_axis(dy, axis, x.shape[axis]) / x.shape[axis], want)

    def test_mean_grad(self):
        # every axis, and everything, of shapes whose dim 0 plays the batch
        # (the count comes from x: batch 1, 3 and 5 give 1/1, 1/3, 1/5)
        for shape in [(3, 4), (5, 2, 3), (1, 4), (6,)]:
            x = randn(*shape, seed=len(shape))
            for axis in [None, *range(len(shape))]:
                with self.subTest(shape=shape, axis=axis):
                    out = () if axis is None else shape[:axis] + shape[axis + 1:]
                    dy = randn(*out, seed=11 if axis is None else 12 + axis)
                    (want,) = vjp(lambda t: pt.mean(t, axis), [x], dy)
                    got = pg.mean_grad(x, dy, axis)
                    self.close(got, want)
                    self.nonzero(got)
        with self.assertRaises(ValueError):
            pg.mean_grad(randn(2, 3, seed=1), randn(2, seed=2))          # dy not a scalar
        with self.assertRaises(ValueError):
            pg.mean_grad(randn(2, 3, seed=1), randn(3, seed=2), axis=1)  # shape without axis 1: [2]
        with self.assertRaises(ValueError):
            pg.mean_grad(randn(2, 3, seed=1), randn(2, seed=2), axis=2)


# ---------------------------------------------------------------- layers --

class TestLayers(Case):
    def test_linear(self):
        for xs in [(2, 3, 4), (5, 4), (4,)]:
            with self.subTest(x=xs):
                x, w, b = randn(*xs, seed=1), randn(4, 6, seed=2), randn(6, seed=3)
                dy = randn(*xs[:-1], 6, seed=4)
                dx, dw, db = vjp(pt.linear, [x, w, b], dy)
                self.close(pg.linear_grad_input(dy, w), dx)
                self.close(pg.linear_grad_weight(x, dy), dw)
                self.close(pg.sum_to(dy, (6,)), db)

    def test_layer_norm(self):
        for eps in (1e-5, 1e-1):
            x, g, b = 2.0 * randn(2, 3, 8, seed=5), randn(8, seed=6), randn(8, seed=7)
            x = x + 3.0                                   # a mean far from 0
            dy = randn(2, 3, 8, seed=8)
            want = vjp(lambda *t: pt.layer_norm(*t, eps=eps), [x, g, b], dy)
            got = pg.layer_norm_grad(x, g, dy, eps=eps)
            for n, a, w in zip(("dx", "dgamma", "dbeta"), got, want):
                with self.subTest(eps=eps, grad=n):
                    self.close(a, w)
                    self.nonzero(a)

    def test_gelu(self):
        x = torch.cat([torch.linspace(-6, 6, 49, dtype=D64), randn(2, 7, seed=9).reshape(-1)])
        dy = randn(*x.shape, seed=10)
        for approximate in (False, True):
            with self.subTest(approximate=approximate):
                (want,) = vjp(lambda t: pt.gelu(t, approximate), [x], dy)
                self.close(pg.gelu_grad(x, dy, approximate), want)
        # the two forms have different derivatives
        diff = pg.gelu_grad(x, dy, True) - pg.gelu_grad(x, dy, False)
        self.assertGreater(diff.abs().max().item(), 1e-5)

    def test_relu(self):
        x = torch.cat([randn(11, seed=11), torch.zeros(3, dtype=D64)])
        dy = randn(14, seed=12)
        (want,) = vjp(pt.relu, [x], dy)
        got = pg.relu_grad(x, dy)
        self.close(got, want)
        self.assertTrue(torch.equal(got[-3:], torch.zeros(3, dtype=D64)))     # 0 at x = 0

    def test_patch_embed(self):
        img, w, b = randn(2, 3, 4, 6, seed=13), randn(3 * 2 * 2, 5, seed=14), randn(5, seed=15)
        dy = randn(2, 6, 5, seed=16)
        _, dw, db = vjp(lambda *t: pt.patch_embed(*t, patch=2), [img, w, b], dy)
        gw, gb = pg.patch_embed_grad(img, dy, 2)
        self.close(gw, dw)
        self.close(gb, db)

    def test_token_embed(self):
        ids = torch.tensor([[0, 3, 3, 6], [6, 1, 3, 0]], dtype=torch.int32)  # repeats, 2 unused
        table, dy = randn(7, 5, seed=17), randn(2, 4, 5, seed=18)
        (want,) = vjp(lambda t: pt.token_embed(ids, t), [table], dy)
        self.close(pg.token_embed_grad(ids, dy, 7), want)
        with self.assertRaises(ValueError):
            pg.token_embed_grad(ids, dy, 6)

    def test_class_token(self):
        x, cls, dy = randn(2, 3, 4, seed=19), randn(4, seed=20), randn(2, 4, 4, seed=21)
        dx, dcls = vjp(pt.class_token, [x, cls], dy)
        gx, gcls = pg.class_token_grad(dy)
        self.close(gx, dx)
        self.close(gcls, dcls)

    def test_select_token(self):
        x = randn(2, 5, 3, seed=22)
        for index in (0, 2, 4):
            with self.subTest(index=index):
                dy = randn(2, 3, seed=23 + index)
                (want,) = vjp(lambda t: pt.select_token(t, index), [x], dy)
                self.close(pg.select_token_grad(dy, index, 5), want)

    def test_cross_entropy(self):
        for shape in [(3, 5), (2, 4, 5)]:
            with self.subTest(shape=shape):
                logits = 3.0 * randn(*shape, seed=24)
                g = torch.Generator().manual_seed(25)
                labels = torch.randint(0, 5, shape[:-1], generator=g).to(torch.int32)
                dy = torch.tensor(1.7, dtype=D64)
                (want,) = vjp(lambda t: pt.cross_entropy(t, labels), [logits], dy)
                self.close(pg.cross_entropy_grad(logits, labels, dy), want)
                for e in [0.1, 0.6]:
                    (want,) = vjp(lambda t: pt.cross_entropy(t, labels, smoothing=e), [logits], dy)
                    self.close(pg.cross_entropy_grad(logits, labels, dy, smoothing=e), want)

    def test_spd_gate(self):
        x = randn(2, 3, 4, seed=26)
        for gshape in [(4,), (3, 4)]:
            with self.subTest(gamma=gshape):
                gamma, dy = 0.5 * randn(*gshape, seed=27), randn(2, 3, 4, seed=28)
                want = vjp(pt.spd_gate, [x, gamma], dy)
                got = pg.spd_gate_grad(x, gamma, dy)
                self.close(got[0], want[0])
                self.close(got[1], want[1])


# ------------------------------------------------------------- rotations --

def rope_case(mode, T=5, D=8, heads=2):
    """(positions [T, A], frequencies [D/2, A]) of a rope mode, with a special token."""
    if mode == "seq":
        return pt.seq_positions(T - 1, 1, D64), pt.rope_freqs("seq", D, heads, 100.0, D64)
    pos = pt.grid_positions(2, (T - 1) // 2, 1, D64)
    if mode == "axial":
        return pos, pt.rope_freqs("axial", D, heads, 100.0, D64)
    return pos, 0.7 * randn(D // 2, 2, seed=31)                    # mixed: learned


class TestRotations(Case):
    def test_rope_grad_freqs(self):
        for mode in ("seq", "axial", "mixed"):
            for xshape in [(2, 5, 8), (5, 8), (2, 3, 5, 8)]:
                with self.subTest(mode=mode, x=xshape):
                    pos, freqs = rope_case(mode)
                    x, dy = randn(*xshape, seed=32), randn(*xshape, seed=33)
                    dx, dfreqs = vjp(lambda a, f: pt.rope(a, pos, f), [x, freqs], dy)
                    got = pg.rope_grad_freqs(x, pos, freqs, dy)
                    self.close(got, dfreqs)
                    self.nonzero(got)
                    # the documented VJP in x: a rope by the opposite angle
                    self.close(pt.rope(dy, pos, -freqs), dx)

    def test_householder_grad_freqs(self):
        for mode in ("seq", "mixed"):
            with self.subTest(mode=mode):
                pos, _ = rope_case(mode)
                A = pos.shape[1]
                f1, f2 = randn(4, A, seed=34), randn(4, A, seed=35)
                x, dy = randn(2, 5, 8, seed=36), randn(2, 5, 8, seed=37)
                dx, df1, df2 = vjp(lambda a, u, v: pt.householder(a, pos, u, v), [x, f1, f2], dy)
                g1, g2 = pg.householder_grad_freqs(x, pos, f1, f2, dy)
                self.close(g1, df1)
                self.close(g2, df2)
                self.nonzero(g1)
                # (H(a2) H(a1))^T = H(a1) H(a2): the VJP in x swaps f1 and f2
                self.close(pt.householder(dy, pos, f2, f1), dx)
                # and it is the rope by 2 (f2 - f1)
                self.close(pt.householder(x, pos, f1, f2), pt.rope(x, pos, 2 * (f2 - f1)))

    def test_skew(self):
        for pshape in [(6,), (2, 6), (2, 3, 6)]:
            with self.subTest(params=pshape):
                p = randn(*pshape, seed=38)
                dS = randn(*pshape[:-1], 4, 4, seed=39)
                (want,) = vjp(lambda t: pt.skew(t, 4), [p], dS)
                self.close(pg.skew_grad(dS, 4), want)

    def test_sparse_skew(self):
        for support in ([0, 2, 5], [1, 3, 4, 9, 14], list(range(15))):
            with self.subTest(support=support):
                p, dS = randn(len(support), seed=40), randn(6, 6, seed=41)
                (want,) = vjp(lambda t: pt.sparse_skew(t, 6, support), [p], dS)
                self.close(pg.sparse_skew_grad(dS, 6, support), want)

    def test_cayley(self):
        skew = pt.skew(randn(15, seed=42), 6)
        general = 0.3 * randn(6, 6, seed=43)                     # not skew
        for name, S in [("skew", skew), ("general", general)]:
            for xshape in [(2, 3, 6), (4, 6)]:
                with self.subTest(S=name, x=xshape):
                    x, dy = randn(*xshape, seed=44), randn(*xshape, seed=45)
                    dx, dS = vjp(pt.cayley, [x, S], dy)
                    gx, gS = pg.cayley_grad(x, S, dy)
                    self.close(gx, dx)
                    self.close(gS, dS)
        # through the skew builder, as the models use it
        p, x, dy = randn(15, seed=46), randn(2, 3, 6, seed=47), randn(2, 3, 6, seed=48)
        (dp,) = vjp(lambda t: pt.cayley(x, pt.skew(t, 6)), [p], dy)
        self.close(pg.skew_grad(pg.cayley_grad(x, pt.skew(p, 6), dy)[1], 6), dp)

    def test_generator_exp(self):
        grid = pt.grid_positions(2, 2, 1, D64)
        cases = [("relative", pt.relative_positions(grid), pt.skew(randn(2, 6, seed=49), 4)),
                 ("flat", randn(3, 2, seed=50), pt.skew(randn(2, 6, seed=51), 4)),
                 ("general", randn(2, 3, seed=52), 0.5 * randn(3, 4, 4, seed=53))]
        for name, r, L in cases:
            with self.subTest(case=name):
                dR = randn(*r.shape[:-1], 4, 4, seed=54)
                _, dL = vjp(pt.generator_exp, [r, L], dR)
                got = pg.generator_exp_grad(r, L, dR)
                self.close(got, dL)
                self.nonzero(got)

    def test_apply_rotation(self):
        x, R = randn(2, 3, 8, seed=55), randn(3, 4, 4, seed=56)
        dy = randn(2, 3, 8, seed=57)
        dx, dR = vjp(lambda a, m: pt.apply_rotation(a, m, 2), [x, R], dy)
        gx, gR = pg.apply_rotation_grad(x, R, dy, 2)
        self.close(gx, dx)
        self.close(gR, dR)

    def test_commutator_norm(self):
        dy = torch.tensor(0.7, dtype=D64)
        L = randn(4, 3, 3, seed=58)
        L[1] *= 3.0
        L[3] *= 2.0                                   # the pair (1, 3) is clearly maximal
        cases = {"clear maximum": L}
        c = L[:3].clone()
        c[2] = c[0]                                   # pairs (0, 1) and (1, 2) tie: (0, 1) wins
        cases["tie"] = c
        cases["general"] = randn(3, 4, 4, seed=59)
        for name, gens in cases.items():
            with self.subTest(case=name):
                (want,) = vjp(pt.commutator_norm, [gens], dy)
                got = pg.commutator_norm_grad(gens, dy)
                self.close(got, want)
                self.nonzero(got)
        ia, ib = torch.triu_indices(4, 4, 1)
        norms = torch.linalg.matrix_norm(L[ia] @ L[ib] - L[ib] @ L[ia])
        self.assertEqual((int(ia[norms.argmax()]), int(ib[norms.argmax()])), (1, 3))
        self.assertGreater(norms.max() - norms.sort().values[-2], 1.0)
        got = pg.commutator_norm_grad(L, dy)
        self.assertTrue(torch.equal(got[[0, 2]], torch.zeros(2, 3, 3, dtype=D64)))
        got = pg.commutator_norm_grad(cases["tie"], dy)
        self.assertTrue(torch.equal(got[2], torch.zeros(3, 3, dtype=D64)))
        # commuting generators: C = 0, the gradient is exactly 0 (never NaN)
        diag = torch.diag_embed(randn(3, 4, seed=60))
        self.assertTrue(torch.equal(pg.commutator_norm_grad(diag, dy), torch.zeros_like(diag)))
        (want,) = vjp(pt.commutator_norm, [diag], dy)
        self.close(pg.commutator_norm_grad(diag, dy), want)


# ------------------------------------------------------------- attention --

class TestAttention(Case):
    def check(self, mask, skip_base=0, rel=False, heads=2, T=5, Dh=3, scale=0.45):
        B, D = 2, heads * Dh
        q, k, v = randn(B, T, D, seed=61), randn(B, T, D, seed=62), randn(B, T, D, seed=63)
        dy = randn(B, T, D, seed=64)
        args = [q, k, v]
        if rel:
            args.append(pt.generator_exp(pt.relative_positions(pt.seq_positions(T, 0, D64)),
                                         pt.skew(0.5 * randn(1, Dh * (Dh - 1) // 2, seed=65), Dh))
                        + 0.1 * randn(T, T, Dh, Dh, seed=66))       # not only rotations

        def fwd(q, k, v, r=None):
            return pt.attention(q, k, v, heads, scale, mask, skip_base, rel=r)

        want = vjp(fwd, args, dy)
        y, lse = pt.attention(q, k, v, heads, scale, mask, skip_base,
                              rel=args[3] if rel else None, return_lse=True)
        got = pg.attention_grad(q, k, v, y, lse, dy, heads, scale, mask, skip_base,
                                rel=args[3] if rel else None)
        self.assertEqual(len(got), 4 if rel else 3)
        for n, a, w in zip(("dq", "dk", "dv", "drel"), got, want):
            with self.subTest(grad=n):
                self.assertTrue(torch.isfinite(a).all())
                self.close(a, w)
                if mask != "skip" or n == "dv":
                    self.nonzero(a)
                else:   # one visible key: the softmax is constant, exactly
                    self.zero(a)
        return got

    def test_masks(self):
        for mask in ("none", "causal"):
            for rel in (False, True):
                with self.subTest(mask=mask, rel=rel):
                    self.check(mask, rel=rel)

    def test_skip_rows_without_key(self):
        for skip_base in (0, 1, 2):
            for rel in (False, True):
                with self.subTest(skip_base=skip_base, rel=rel):
                    dq, dk, dv = self.check("skip", skip_base, rel, heads=2)[:3]
                    # head h: queries i < skip_base + h see no key; keys
                    # j > T - 1 - (skip_base + h) are seen by no query
                    for h in range(2):
                        n = skip_base + h
                        cols = slice(3 * h, 3 * h + 3)
                        self.zero(dq[:, :n, cols])
                        self.zero(dk[:, 5 - n:, cols])
                        self.zero(dv[:, 5 - n:, cols])

    def test_default_scale(self):
        q, k, v, dy = (randn(1, 4, 8, seed=s) for s in (71, 72, 73, 74))
        want = vjp(lambda *t: pt.attention(*t, 2), [q, k, v], dy)
        y, lse = pt.attention(q, k, v, 2, return_lse=True)
        for a, w in zip(pg.attention_grad(q, k, v, y, lse, dy, 2), want):
            self.close(a, w)

    def test_lse(self):
        # The log-sum-exp of each row's visible scores: -inf for a skip row
        # without a key, the one score for a row with one.
        q, k, v = randn(2, 5, 6, seed=75), randn(2, 5, 6, seed=76), randn(2, 5, 6, seed=77)
        _, lse = pt.attention(q, k, v, 2, 0.4, "causal", return_lse=True)
        s = 0.4 * q.reshape(2, 5, 2, 3).transpose(1, 2) @ k.reshape(2, 5, 2, 3).permute(0, 2, 3, 1)
        want = torch.stack([torch.logsumexp(s[..., i, :i + 1], dim=-1) for i in range(5)], -1)
        self.close(lse, want)
        _, lse = pt.attention(q, k, v, 2, 0.4, "skip", 1, return_lse=True)
        self.assertTrue(torch.isneginf(lse[:, 0, 0]).all() and torch.isneginf(lse[:, 1, :2]).all())
        self.close(lse[:, 0, 1:], torch.stack([s[:, 0, i, i - 1] for i in range(1, 5)], -1))


if __name__ == "__main__":
    unittest.main()
