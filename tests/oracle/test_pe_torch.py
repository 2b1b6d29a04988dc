"""Property tests that pin down the math of pe_torch (and so of docs/dialect.md)."""

import math
import os
import sys
import unittest

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pe_torch as pt  # noqa: E402

torch.set_num_threads(1)
D64 = torch.float64


def rot(t):
    """The 2x2 rotation [[cos t, -sin t], [sin t, cos t]]."""
    t = torch.as_tensor(t, dtype=D64)
    c, s = torch.cos(t), torch.sin(t)
    return torch.stack([torch.stack([c, -s]), torch.stack([s, c])])


def gen(seed):
    return torch.Generator().manual_seed(seed)


def randn(*shape, seed=0):
    return torch.randn(*shape, generator=gen(seed), dtype=D64)


class Case(unittest.TestCase):
    def close(self, a, b, tol=1e-10):
        a, b = torch.as_tensor(a, dtype=D64), torch.as_tensor(b, dtype=D64)
        self.assertEqual(tuple(a.shape), tuple(b.shape))
        err = (a - b).abs().max().item() if a.numel() else 0.0
        self.assertLessEqual(err, tol, f"max abs error {err}")


# ------------------------------------------------------------------ layers --

class TestLayers(Case):
    def test_linear(self):
        x, w, b = randn(2, 3, 4, seed=1), randn(4, 5, seed=2), randn(5, seed=3)
        self.close(pt.linear(x, w, b), F.linear(x, w.t(), b))
        self.close(pt.linear(x, w), x @ w)

    def test_layer_norm(self):
        x, g, b = randn(2, 3, 6, seed=1), randn(6, seed=2), randn(6, seed=3)
        self.close(pt.layer_norm(x, g, b, eps=1e-3), F.layer_norm(x, (6,), g, b, eps=1e-3))
        y = pt.layer_norm(x, torch.ones(6, dtype=D64), torch.zeros(6, dtype=D64), eps=0.0)
        self.close(y.mean(-1), torch.zeros(2, 3))
        self.close((y ** 2).mean(-1), torch.ones(2, 3))

    def test_gelu_forms(self):
        x = torch.linspace(-4, 4, 33, dtype=D64)
        erf_form = x * (1 + torch.erf(x / math.sqrt(2))) / 2
        tanh_form = x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))) / 2
        self.close(pt.gelu(x), erf_form)
        self.close(pt.gelu(x, approximate=True), tanh_form)
        self.assertGreater((erf_form - tanh_form).abs().max().item(), 1e-5)

    def test_relu_scale_mean(self):
        x = randn(2, 3, 4, seed=4)
        self.close(pt.relu(x), torch.where(x > 0, x, torch.zeros_like(x)))
        self.close(pt.scale(x, 0.5, 2.0), 0.5 * x + 2.0)
        self.close(pt.mean(x, 1), x.sum(1) / 3)
        m = pt.mean(x)
        self.assertEqual(m.dim(), 0)
        self.close(m, x.sum() / 24)

    def test_binary_suffix_broadcast(self):
        a, td, d = randn(2, 3, 4, seed=5), randn(3, 4, seed=6), randn(4, seed=7)
        self.close(pt.add(a, td), a + td.expand(2, 3, 4))
        self.close(pt.sub(d, a), d.expand(2, 3, 4) - a)
        self.close(pt.mul(a, d), a * d.expand(2, 3, 4))
        s = torch.tensor(2.0, dtype=D64)
        self.close(pt.add(s, s), torch.tensor(4.0))
        with self.assertRaises(ValueError):
            pt.add(a, randn(2, 1, 4))                 # broadcastable, but not a suffix
        with self.assertRaises(ValueError):
            pt.mul(a, randn(3, seed=8))

    def test_patch_embed_is_conv2d(self):
        B, C, H, W, p, Dm = 2, 3, 8, 12, 4, 5
        img, w, b = randn(B, C, H, W, seed=1), randn(C * p * p, Dm, seed=2), randn(Dm, seed=3)
        conv = F.conv2d(img, w.t().reshape(Dm, C, p, p), b, stride=p)   # [B, D, H/p, W/p]
        expect = conv.flatten(2).transpose(1, 2)
        self.close(pt.patch_embed(img, w, b, p), expect)

    def test_patch_embed_flatten_order(self):
        img = randn(1, 2, 4, 6, seed=4)
        eye = torch.eye(2 * 2 * 2, dtype=D64)
        v = pt.patch_embed(img, eye, torch.zeros(8, dtype=D64), 2)        # raw patches
        n, c, py, px = 4, 1, 1, 0                 # patch 4 = row 1, column 1 of a 2x3 grid
        self.close(v[0, n, (c * 2 + py) * 2 + px], img[0, c, 1 * 2 + py, 1 * 2 + px])

    def test_embeddings_and_tokens(self):
        table = randn(7, 3, seed=1)
        ids = torch.tensor([[0, 6, 2], [3, 3, 1]], dtype=torch.int32)
        y = pt.token_embed(ids, table)
        self.close(y[1, 0], table[3])
        self.close(y[0, 1], table[6])
        x, cls = randn(2, 4, 3, seed=2), randn(3, seed=3)
        z = pt.class_token(x, cls)
        self.assertEqual(tuple(z.shape), (2, 5, 3))
        self.close(z[1, 0], cls)
        self.close(z[:, 1:], x)
        self.close(pt.select_token(z, 2), x[:, 1])

    def test_cross_entropy(self):
        logits = randn(2, 5, 7, seed=1)
        labels = torch.randint(0, 7, (2, 5), generator=gen(2)).to(torch.int32)
        expect = F.cross_entropy(logits.reshape(10, 7), labels.reshape(10).long())
        self.close(pt.cross_entropy(logits, labels), expect)
        manual = (torch.logsumexp(logits, -1) - logits.gather(-1, labels.long()[..., None])[..., 0]).mean()
        self.close(pt.cross_entropy(logits, labels), manual)

    def test_cross_entropy_label_smoothing(self):
        # The formula the kernels compute, against PyTorch's label_smoothing.
        logits = 2.0 * randn(2, 5, 7, seed=3)
        labels = torch.randint(0, 7, (2, 5), generator=gen(4)).to(torch.int32)
        for e in [0.0, 0.1, 0.5, 0.9]:
            with self.subTest(smoothing=e):
                picked = logits.gather(-1, labels.long()[..., None])[..., 0]
                manual = (torch.logsumexp(logits, -1) - (1 - e) * picked
                          - (e / 7) * logits.sum(-1)).mean()
                self.close(pt.cross_entropy(logits, labels, smoothing=e), manual)


# --------------------------------------------------------------- positions --

class TestPositions(Case):
    def test_seq_positions(self):
        p = pt.seq_positions(4, special=2)
        self.assertEqual(p.dtype, torch.float32)
        self.close(p, torch.tensor([[0.], [0.], [0.], [1.], [2.], [3.]]))

    def test_grid_positions(self):
        p = pt.grid_positions(2, 3, special=1)
        expect = [[0, 0], [0, 0], [1, 0], [2, 0], [0, 1], [1, 1], [2, 1]]
        self.close(p, torch.tensor(expect, dtype=D64))

    def test_relative_positions(self):
        pos = randn(4, 2, seed=1)
        r = pt.relative_positions(pos)
        for i in range(4):
            for j in range(4):
                self.close(r[i, j], pos[j] - pos[i])

    def test_sinusoidal_seed_formula(self):
        T, Dm, base = 9, 8, 10000.0
        pe = pt.sinusoidal(T, Dm, base, dtype=D64)
        self.assertEqual(tuple(pe.shape), (T, Dm))
        for p, k in [(0, 0), (0, 1), (3, 0), (3, 1), (5, 4), (7, 5), (8, 6), (8, 7)]:
            i = k // 2
            arg = p / base ** (2 * i / Dm)
            self.assertAlmostEqual(pe[p, k].item(), math.sin(arg) if k % 2 == 0 else math.cos(arg), 12)
        self.close(pt.sinusoidal(T, Dm, 100.0, dtype=D64)[4, 2], math.sin(4 / 100 ** (2 / 8)))

    def test_rope_freqs_seq(self):
        f = pt.rope_freqs("seq", 8, heads=2, base=10000.0, dtype=D64)
        self.assertEqual(tuple(f.shape), (4, 1))
        self.close(f[:, 0], torch.tensor([1.0, 0.01, 1.0, 0.01], dtype=D64), 1e-15)
        f1 = pt.rope_freqs("seq", 16, heads=1, base=10.0, dtype=D64)
        self.close(f1[3, 0], 10.0 ** (-6 / 16), 1e-15)

    def test_rope_freqs_axial_layout(self):
        f = pt.rope_freqs("axial", 16, heads=2, base=100.0, dtype=D64)   # Dh = 8
        self.assertEqual(tuple(f.shape), (8, 2))
        a = 100.0 ** (-4 / 8)
        head = torch.tensor([[1, 0], [a, 0], [0, 1], [0, a]], dtype=D64)
        self.close(f, torch.cat([head, head]), 1e-15)
        with self.assertRaises(ValueError):
            pt.rope_freqs("axial", 12, heads=2)                          # Dh = 6


# ---------------------------------------------------------------- rotations --

def rope_vit_axial(x, end_x, end_y, theta=100.0):
    """RoPE-ViT's compute_axial_cis + apply_rotary_emb for x [B, H, N, Dh]."""
    dh = x.shape[-1]
    freqs = 1.0 / (theta ** (torch.arange(0, dh, 4)[: dh // 4].to(D64) / dh))
    t = torch.arange(end_x * end_y)
    t_x, t_y = (t % end_x).to(D64), torch.div(t, end_x, rounding_mode="floor").to(D64)
    fx, fy = torch.outer(t_x, freqs), torch.outer(t_y, freqs)
    cis = torch.cat([torch.polar(torch.ones_like(fx), fx), torch.polar(torch.ones_like(fy), fy)], -1)
    xc = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2).contiguous())
    return torch.view_as_real(xc * cis).flatten(3)


def seed_rotary(x, T):
    """Seed 001: build_freqs_cis + rotary_apply for x [B, H, T, d]."""
    d = x.shape[-1]
    theta = torch.exp(-torch.arange(0, d, 2, dtype=D64) * (math.log(10000.0) / d))
    ang = torch.arange(T, dtype=D64)[:, None] * theta[None, :]
    cos, sin = torch.cos(ang), torch.sin(ang)
    x1, x2 = x[..., ::2], x[..., 1::2]
    return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).flatten(-2)


def heads_view(x, heads):
    B, T, Dm = x.shape
    return x.reshape(B, T, heads, Dm // heads).transpose(1, 2)


class TestRope(Case):
    def test_two_vector_is_explicit_rotation(self):
        x = torch.tensor([[[0.3, -1.2]]], dtype=D64)
        pos, freqs = torch.tensor([[3.0]], dtype=D64), torch.tensor([[0.7]], dtype=D64)
        self.close(pt.rope(x, pos, freqs)[0, 0], rot(2.1) @ x[0, 0])

    def test_interleaved_pairs_explicit(self):
        x, pos, freqs = randn(2, 3, 8, seed=1), randn(3, 2, seed=2), randn(4, 2, seed=3)
        y = pt.rope(x, pos, freqs)
        for t in range(3):
            for j in range(4):
                th = (pos[t] * freqs[j]).sum()
                self.close(y[:, t, 2 * j:2 * j + 2], x[:, t, 2 * j:2 * j + 2] @ rot(th).t())

    def test_matches_rope_vit_axial(self):
        heads, Dm, rows, cols = 2, 16, 3, 4
        x = randn(2, 1 + rows * cols, Dm, seed=4)
        y = pt.rope(x, pt.grid_positions(rows, cols, 1, dtype=D64),
                    pt.rope_freqs("axial", Dm, heads, 100.0, dtype=D64))
        xh, yh = heads_view(x, heads), heads_view(y, heads)
        self.close(yh[:, :, 0], xh[:, :, 0])                              # CLS unrotated
        self.close(yh[:, :, 1:], rope_vit_axial(xh[:, :, 1:], cols, rows), 1e-12)

    def test_matches_seed_rotary(self):
        heads, Dm, T = 2, 12, 5
        x = randn(1, T, Dm, seed=5)
        y = pt.rope(x, pt.seq_positions(T, dtype=D64), pt.rope_freqs("seq", Dm, heads, dtype=D64))
        self.close(heads_view(y, heads), seed_rotary(heads_view(x, heads), T), 1e-12)

    def test_norm_preserved(self):
        x = randn(2, 7, 8, seed=6)
        cases = [(pt.seq_positions(7, dtype=D64), pt.rope_freqs("seq", 8, 2, dtype=D64)),
                 (pt.grid_positions(2, 3, 1, dtype=D64), pt.rope_freqs("axial", 8, 2, dtype=D64)),
                 (pt.grid_positions(2, 3, 1, dtype=D64), randn(4, 2, seed=7))]
        for pos, freqs in cases:
            self.close(pt.rope(x, pos, freqs).norm(dim=-1), x.norm(dim=-1))
        self.assertGreater((pt.rope(x, *cases[2]) - x).abs().max().item(), 0.1)

    def _scores(self, q, k, pos, freqs):
        return pt.rope(q, pos, freqs) @ pt.rope(k, pos, freqs).transpose(-1, -2)

    def test_scores_shift_invariant_1d(self):
        q, k = randn(1, 6, 8, seed=8), randn(1, 6, 8, seed=9)
        pos, freqs = pt.seq_positions(6, dtype=D64), pt.rope_freqs("seq", 8, 2, dtype=D64)
        s = self._scores(q, k, pos, freqs)
        self.close(self._scores(q, k, pos + 11.5, freqs), s, 1e-10)
        self.assertGreater((self._scores(q, k, pos * 2, freqs) - s).abs().max().item(), 1e-3)

    def test_scores_shift_invariant_2d(self):
        q, k = randn(1, 7, 8, seed=10), randn(1, 7, 8, seed=11)
        pos = pt.grid_positions(2, 3, 1, dtype=D64)
        for freqs in (pt.rope_freqs("axial", 8, 2, dtype=D64), randn(4, 2, seed=12)):
            s = self._scores(q, k, pos, freqs)
            shift = torch.tensor([[3.0, -2.0]], dtype=D64)
            self.close(self._scores(q, k, pos + shift, freqs), s, 1e-10)

    def test_score_depends_on_difference(self):
        q, k = randn(1, 1, 8, seed=13), randn(1, 1, 8, seed=14)
        freqs = randn(4, 2, seed=15)
        pi, pj = torch.tensor([[1.0, 4.0]], dtype=D64), torch.tensor([[-2.0, 0.5]], dtype=D64)
        lhs = (pt.rope(q, pi, freqs) * pt.rope(k, pj, freqs)).sum()
        rhs = (pt.rope(q, pi - pj, freqs) * k).sum()
        self.close(lhs, rhs, 1e-12)


class TestHouseholder(Case):
    def test_product_is_rotation_by_twice_difference(self):
        a1, a2 = randn(20, seed=1) * 3, randn(20, seed=2) * 3
        prod = pt.householder_matrix(a2) @ pt.householder_matrix(a1)
        for n in range(20):
            self.close(prod[n], rot(2 * (a2[n] - a1[n])), 1e-12)

    def test_reflection(self):
        h = pt.householder_matrix(randn(5, seed=3))
        self.close(h @ h, torch.eye(2, dtype=D64).expand(5, 2, 2), 1e-12)
        self.close(torch.linalg.det(h), -torch.ones(5, dtype=D64), 1e-12)
        a = torch.tensor(0.4, dtype=D64)
        v = torch.stack([torch.cos(a), torch.sin(a)])
        self.close(pt.householder_matrix(a) @ v, -v, 1e-12)                 # flips v

    def test_op_on_pairs(self):
        x, pos = randn(2, 3, 6, seed=4), randn(3, 2, seed=5)
        f1, f2 = randn(3, 2, seed=6), randn(3, 2, seed=7)
        y = pt.householder(x, pos, f1, f2)
        for t in range(3):
            for j in range(3):
                a1, a2 = (pos[t] * f1[j]).sum(), (pos[t] * f2[j]).sum()
                m = pt.householder_matrix(a2) @ pt.householder_matrix(a1)
                self.close(y[:, t, 2 * j:2 * j + 2], x[:, t, 2 * j:2 * j + 2] @ m.t())
        self.close(y.norm(dim=-1), x.norm(dim=-1))


class TestSkewCayley(Case):
    def test_skew_triu_order(self):
        d = 5
        p = torch.arange(1, d * (d - 1) // 2 + 1, dtype=D64)
        S = pt.skew(p, d)
        self.close(S, -S.t())
        self.close(torch.diagonal(S), torch.zeros(d))
        iu = torch.triu_indices(d, d, 1)
        for k in range(iu.shape[1]):
            i, j = iu[0, k].item(), iu[1, k].item()
            self.assertEqual(k, i * d - i * (i + 1) // 2 + j - i - 1)
            self.assertEqual(S[i, j].item(), p[k].item())
        self.assertEqual(S[0, 1].item(), 1.0)
        self.assertEqual(S[1, 2].item(), float(d))                     # after (0,1)..(0,d-1)

    def test_skew_batched(self):
        p = randn(2, 3, 6, seed=1)
        S = pt.skew(p, 4)
        self.assertEqual(tuple(S.shape), (2, 3, 4, 4))
        self.close(S[1, 2], pt.skew(p[1, 2], 4))
        self.close(S, -S.transpose(-1, -2))

    def test_sparse_skew(self):
        d, support = 5, [1, 4, 9]
        p = randn(3, seed=2)
        full = torch.zeros(10, dtype=D64)
        full[support] = p
        S = pt.sparse_skew(p, d, support)
        self.close(S, pt.skew(full, d))
        self.assertEqual(int((S != 0).sum()), 6)

    def test_cayley_orthogonal_and_explicit(self):
        d = 6
        S = pt.skew(randn(15, seed=3), d)
        eye = torch.eye(d, dtype=D64)
        U = pt.cayley(eye, S).t()                       # row e_i -> (U e_i)^T
        self.close(U, (eye - S) @ torch.inverse(eye + S), 1e-12)
        self.close(U.t() @ U, eye, 1e-12)
        self.close(torch.linalg.det(U), 1.0, 1e-12)
        x = randn(2, 3, d, seed=4)
        y = pt.cayley(x, S)
        self.close(y, x @ U.t(), 1e-12)
        self.close(y.norm(dim=-1), x.norm(dim=-1), 1e-12)
        self.close(pt.cayley(x, torch.zeros(d, d, dtype=D64)), x)


def commuting_generators(d=4, k=2, seed=0):
    """k skew generators sharing the 2x2 block structure, so they commute."""
    J = torch.tensor([[0.0, -1.0], [1.0, 0.0]], dtype=D64)
    c = randn(k, d // 2, seed=seed)
    return torch.stack([torch.block_diag(*[c[a, b] * J for b in range(d // 2)]) for a in range(k)])


class TestGenerators(Case):
    def test_exp_of_single_generator(self):
        J = torch.tensor([[[0.0, -1.0], [1.0, 0.0]]], dtype=D64)
        R = pt.generator_exp(torch.tensor([[0.8]], dtype=D64), J)
        self.close(R[0], rot(0.8), 1e-12)

    def test_commuting_is_relative(self):
        L = commuting_generators(seed=1)
        ri, rj = randn(2, seed=2), randn(2, seed=3)
        Ri, Rj, Rd = pt.generator_exp(torch.stack([ri, rj, rj - ri]), L)
        self.close(Ri.t() @ Rj, Rd, 1e-12)
        self.close(Ri.t() @ Ri, torch.eye(4, dtype=D64), 1e-12)

    def test_noncommuting_is_not_relative(self):
        L = pt.skew(randn(2, 6, seed=4), 4)
        ri, rj = randn(2, seed=5), randn(2, seed=6)
        Ri, Rj, Rd = pt.generator_exp(torch.stack([ri, rj, rj - ri]), L)
        self.close(Ri.t() @ Ri, torch.eye(4, dtype=D64), 1e-12)           # still rotations
        self.assertGreater((Ri.t() @ Rj - Rd).abs().max().item(), 1e-3)

    def test_batched_shapes(self):
        pos = pt.grid_positions(2, 2, 1, dtype=D64)
        R = pt.generator_exp(pt.relative_positions(pos), commuting_generators(seed=7))
        self.assertEqual(tuple(R.shape), (5, 5, 4, 4))
        self.close(R[2, 2], torch.eye(4, dtype=D64), 1e-12)

    def test_commutator_norm(self):
        C = commuting_generators(k=3, seed=8).requires_grad_()
        zero = pt.commutator_norm(C)
        self.close(zero, 0.0, 1e-12)
        (g,) = torch.autograd.grad(zero, C)                  # subgradient 0, not NaN
        self.assertTrue(torch.equal(g, torch.zeros_like(g)))
        L = pt.skew(randn(3, 6, seed=9), 4)
        expect = max(torch.linalg.norm(L[a] @ L[b] - L[b] @ L[a]).item()
                     for a in range(3) for b in range(a + 1, 3))
        self.close(pt.commutator_norm(L), expect, 1e-12)
        self.assertGreater(expect, 1e-3)

    def test_apply_rotation(self):
        x, R = randn(2, 3, 6, seed=10), randn(3, 3, 3, seed=11)
        y = pt.apply_rotation(x, R, heads=2)
        for t in range(3):
            for h in range(2):
                self.close(y[:, t, 3 * h:3 * h + 3], x[:, t, 3 * h:3 * h + 3] @ R[t].t())

    def test_spd_gate(self):
        x, g, gt = randn(2, 3, 4, seed=12), randn(4, seed=13), randn(3, 4, seed=14)
        self.close(pt.spd_gate(x, g), x * torch.exp(g).expand(2, 3, 4))
        self.close(pt.spd_gate(x, gt), x * torch.exp(gt).expand(2, 3, 4))
        self.close(pt.spd_gate(x, torch.zeros(4, dtype=D64)), x)
        self.close(pt.spd_gate(x, torch.full((4,), math.log(3.0), dtype=D64)), 3 * x)


# ---------------------------------------------------------------- attention --

def naive_attention(q, k, v, heads, scale, visible, rel=None):
    """Per head, per query: softmax over the visible keys only; no key -> 0."""
    B, T, Dm = q.shape
    dh = Dm // heads
    out = torch.zeros_like(q)
    for b in range(B):
        for h in range(heads):
            sl = slice(h * dh, (h + 1) * dh)
            for i in range(T):
                keys = [j for j in range(T) if visible(h, i, j)]
                if not keys:
                    continue
                s = torch.stack([scale * (q[b, i, sl] @ (k[b, j, sl] if rel is None
                                                         else rel[i, j] @ k[b, j, sl]))
                                 for j in keys])
                w = torch.exp(s - s.max())
                w = w / w.sum()
                out[b, i, sl] = sum(w[n] * v[b, j, sl] for n, j in enumerate(keys))
    return out


class TestAttention(Case):
    B, T, Dm, H = 2, 5, 6, 2

    def qkv(self, seed):
        return [randn(self.B, self.T, self.Dm, seed=seed + n) for n in range(3)]

    def test_no_mask(self):
        q, k, v = self.qkv(1)
        got = pt.attention(q, k, v, self.H, 0.7)
        self.close(got, naive_attention(q, k, v, self.H, 0.7, lambda h, i, j: True), 1e-12)
        self.close(pt.attention(q, k, v, self.H), pt.attention(q, k, v, self.H, 1 / math.sqrt(3)))

    def test_matches_reference_multihead(self):
        q, k, v = self.qkv(4)
        sh = lambda t: heads_view(t, self.H)                            # noqa: E731
        ref = torch.softmax(sh(q) @ sh(k).transpose(-1, -2) / math.sqrt(3), -1) @ sh(v)
        self.close(pt.attention(q, k, v, self.H), ref.transpose(1, 2).reshape(q.shape), 1e-12)

    def test_causal(self):
        q, k, v = self.qkv(7)
        got = pt.attention(q, k, v, self.H, 0.5, mask="causal")
        self.close(got, naive_attention(q, k, v, self.H, 0.5, lambda h, i, j: j <= i), 1e-12)
        self.close(got[:, 0], v[:, 0])                                   # row 0 sees only key 0
        k2, v2 = k.clone(), v.clone()
        k2[:, 3:] += 5.0
        v2[:, 3:] -= 2.0
        self.close(pt.attention(q, k2, v2, self.H, 0.5, mask="causal")[:, :3], got[:, :3])

    def test_skip_rows(self):
        q, k, v = self.qkv(10)
        n = 1
        got = pt.attention(q, k, v, self.H, 0.5, mask="skip", skip_base=n)
        dh = self.Dm // self.H
        for h in range(self.H):
            sl = slice(h * dh, (h + 1) * dh)
            for i in range(self.T):
                j = i - (n + h)
                expect = v[:, j, sl] if j >= 0 else torch.zeros(self.B, dh, dtype=D64)
                self.assertTrue(torch.equal(got[:, i, sl], expect), (h, i))  # exact
        ref = naive_attention(q, k, v, self.H, 0.5, lambda h, i, j: j == i - (n + h))
        self.close(got, ref, 1e-12)

    def test_skip_gradients_finite_and_zero_on_empty_rows(self):
        q, k, v = [t.requires_grad_() for t in self.qkv(13)]
        out = pt.attention(q, k, v, self.H, 0.5, mask="skip", skip_base=2)
        gq, gk, gv = torch.autograd.grad(out.pow(2).sum() + out.sum(), (q, k, v))
        for g in (gq, gk, gv):
            self.assertTrue(torch.isfinite(g).all())
        # Head 1 of query 2 has no key (2 - 3 < 0): its q slice gets exactly 0.
        self.assertTrue(torch.equal(gq[:, 2, 3:], torch.zeros(self.B, 3, dtype=D64)))
        # A single visible key: the output does not depend on q or k at all.
        self.assertTrue(torch.equal(gq, torch.zeros_like(gq)))
        self.assertTrue(torch.equal(gk, torch.zeros_like(gk)))

    def test_float32_no_nan(self):
        q, k, v = [t.float().requires_grad_() for t in self.qkv(16)]
        out = pt.attention(q, k, v, self.H, 0.5, mask="skip", skip_base=4)
        self.assertTrue(torch.isfinite(out).all())
        g = torch.autograd.grad(out.sum(), (q, k, v))
        self.assertTrue(all(torch.isfinite(t).all() for t in g))

    def test_relative(self):
        q, k, v = self.qkv(19)
        rel = pt.generator_exp(pt.relative_positions(pt.seq_positions(self.T, dtype=D64)),
                               pt.skew(randn(1, 3, seed=22), 3))
        got = pt.attention(q, k, v, self.H, 0.5, rel=rel)
        self.close(got, naive_attention(q, k, v, self.H, 0.5, lambda h, i, j: True, rel), 1e-12)
        eye = torch.eye(3, dtype=D64).expand(self.T, self.T, 3, 3)
        self.close(pt.attention(q, k, v, self.H, 0.5, rel=eye), pt.attention(q, k, v, self.H, 0.5))
        causal = pt.attention(q, k, v, self.H, 0.5, mask="causal", rel=rel)
        self.close(causal, naive_attention(q, k, v, self.H, 0.5, lambda h, i, j: j <= i, rel), 1e-12)

    def test_rope_relative_equivalence(self):
        """RoPE on q and k equals relative attention with rel[i, j] = R_i^T R_j."""
        T, heads, dh = 4, 2, 4
        q, k, v = [randn(1, T, heads * dh, seed=23 + n) for n in range(3)]
        pos, fh = pt.seq_positions(T, dtype=D64), randn(dh // 2, 1, seed=26)
        basis = torch.eye(dh, dtype=D64).unsqueeze(1).expand(dh, T, dh)   # basis[m, t] = e_m
        R = pt.rope(basis, pos, fh).permute(1, 2, 0)                     # R[t][:, m] = R_t e_m
        rel = R.transpose(-1, -2).unsqueeze(1) @ R.unsqueeze(0)
        freqs = fh.repeat(heads, 1)
        lhs = pt.attention(pt.rope(q, pos, freqs), pt.rope(k, pos, freqs), v, heads, 0.5)
        self.close(lhs, pt.attention(q, k, v, heads, 0.5, rel=rel), 1e-12)


# ----------------------------------------------------------------- gradients --

def g64(*shape, seed=0):
    return randn(*shape, seed=seed).requires_grad_()


class TestGradcheck(Case):
    def check(self, fn, *inputs):
        self.assertTrue(torch.autograd.gradcheck(fn, inputs, eps=1e-6, atol=1e-6, rtol=1e-5))

    def test_layers(self):
        self.check(pt.linear, g64(2, 3, seed=1), g64(3, 2, seed=2), g64(2, seed=3))
        self.check(lambda x, g, b: pt.layer_norm(x, g, b, 1e-5),
                   g64(2, 4, seed=4), g64(4, seed=5), g64(4, seed=6))
        self.check(pt.gelu, g64(5, seed=7))
        self.check(lambda x: pt.gelu(x, True), g64(5, seed=8))
        self.check(pt.relu, g64(5, seed=9))
        self.check(pt.add, g64(2, 3, seed=10), g64(3, seed=11))
        self.check(pt.sub, g64(3, seed=12), g64(2, 3, seed=13))
        self.check(pt.mul, g64(2, 3, seed=14), g64(2, 3, seed=15))
        self.check(lambda x: pt.scale(x, -1.5, 0.5), g64(4, seed=16))
        self.check(lambda x: pt.mean(x, 1), g64(2, 3, 2, seed=17))
        self.check(pt.mean, g64(2, 3, seed=18))

    def test_embeddings_and_loss(self):
        self.check(lambda img, w, b: pt.patch_embed(img, w, b, 2),
                   g64(1, 2, 4, 2, seed=1), g64(8, 3, seed=2), g64(3, seed=3))
        ids = torch.tensor([[0, 2, 2]], dtype=torch.int32)
        self.check(lambda t: pt.token_embed(ids, t), g64(3, 2, seed=4))
        self.check(pt.class_token, g64(2, 2, 3, seed=5), g64(3, seed=6))
        self.check(lambda x: pt.select_token(x, 1), g64(2, 3, 2, seed=7))
        labels = torch.tensor([[1, 0], [2, 2]], dtype=torch.int32)
        self.check(lambda lg: pt.cross_entropy(lg, labels), g64(2, 2, 3, seed=8))

    def test_rotations(self):
        pos = pt.grid_positions(1, 2, 1, dtype=D64)
        self.check(lambda x, f: pt.rope(x, pos, f), g64(1, 3, 4, seed=1), g64(2, 2, seed=2))
        self.check(lambda x, f1, f2: pt.householder(x, pos, f1, f2),
                   g64(1, 3, 4, seed=3), g64(2, 2, seed=4), g64(2, 2, seed=5))
        self.check(pt.relative_positions, g64(3, 2, seed=6))
        self.check(lambda p: pt.skew(p, 3), g64(2, 3, seed=7))
        self.check(lambda p: pt.sparse_skew(p, 4, [1, 5]), g64(2, seed=8))
        self.check(lambda x, p: pt.cayley(x, pt.skew(p, 3)), g64(2, 3, seed=9), g64(3, seed=10))
        self.check(lambda x, S: pt.cayley(x, S), g64(2, 3, seed=11), g64(3, 3, seed=12))
        self.check(lambda r, p: pt.generator_exp(r, pt.skew(p, 3)), g64(2, 2, seed=13), g64(2, 3, seed=14))
        self.check(lambda x, R: pt.apply_rotation(x, R, 2), g64(1, 2, 4, seed=15), g64(2, 2, 2, seed=16))
        self.check(lambda p: pt.commutator_norm(pt.skew(p, 3)), g64(3, 3, seed=17))
        self.check(pt.spd_gate, g64(1, 2, 3, seed=18), g64(2, 3, seed=19))

    def test_attention(self):
        q, k, v = g64(1, 4, 4, seed=1), g64(1, 4, 4, seed=2), g64(1, 4, 4, seed=3)
        for mask, base in (("none", 0), ("causal", 0), ("skip", 1)):
            self.check(lambda q, k, v: pt.attention(q, k, v, 2, 0.6, mask, base), q, k, v)
        self.check(lambda q, k, v, r: pt.attention(q, k, v, 2, 0.6, "causal", rel=r),
                   q, k, v, g64(4, 4, 2, 2, seed=4))


if __name__ == "__main__":
    unittest.main()
