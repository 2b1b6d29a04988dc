"""PyTorch reference implementation of every `pe` dialect op.

One plain function per op, following docs/dialect.md exactly. All functions
are differentiable with autograd and work in float32 (the compiler's type) as
well as float64 (for finite-difference checks). Conventions shared by all:

- activations are [B, T, D]; multi-head ops split D into `heads` contiguous
  slices of Dh = D / heads (`x.view(B, T, heads, Dh)`);
- rotary pairs are interleaved: pair j is columns (2j, 2j+1), rotated by
  [[cos t, -sin t], [sin t, cos t]];
- positions are [T, A]; axis 0 of a grid position is the column x, axis 1
  the row y; special tokens come first at position 0;
- skew parameters follow the row-major upper-triangle order of
  torch.triu_indices(dim, dim, 1).

Ops without operands (positions, frequency tables, sinusoidal tables) are
computed in float64 and rounded once to `dtype`.
"""

import math

import numpy as np
import torch
import torch.nn.functional as F

import philox

__all__ = [
    "linear", "layer_norm", "gelu", "relu", "add", "sub", "mul", "scale",
    "dropout", "dropout_keep",
    "mean", "patch_embed", "token_embed", "class_token", "select_token",
    "seq_positions", "grid_positions", "rope_freqs", "rope", "householder",
    "skew", "sparse_skew", "cayley", "relative_positions", "generator_exp",
    "apply_rotation", "commutator_norm", "spd_gate", "sinusoidal",
    "attention", "cross_entropy", "householder_matrix", "attention_mask",
    "skip_gather", "offset_table", "pair_gather",
]


# ---------------------------------------------------------------- layers --

def linear(x, w, b=None):
    """y[..., o] = sum_i x[..., i] w[i, o] + b[o]  (w is input-major)."""
    y = torch.matmul(x, w)
    return y if b is None else y + b


def layer_norm(x, gamma, beta, eps=1e-5):
    """(x - mu) / sqrt(var + eps) * gamma + beta over the last dim (biased var)."""
    mu = x.mean(dim=-1, keepdim=True)
    var = ((x - mu) ** 2).mean(dim=-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * gamma + beta


def gelu(x, approximate=False):
    """x (1 + erf(x / sqrt 2)) / 2, or the tanh form when `approximate`."""
    return F.gelu(x, approximate="tanh" if approximate else "none")


def relu(x):
    """max(x, 0); its autograd derivative is (x > 0), 0 at x = 0 as relu_grad's."""
    return torch.relu(x)


def _check_suffix(a, b):
    small, big = (a, b) if a.dim() <= b.dim() else (b, a)
    if tuple(small.shape) != tuple(big.shape[big.dim() - small.dim():]):
        raise ValueError(f"shapes {tuple(a.shape)} and {tuple(b.shape)}: "
                         "neither is a trailing suffix of the other")


def add(a, b):
    """a + b, the lower-rank shape being a trailing suffix of the other."""
    _check_suffix(a, b)
    return a + b


def sub(a, b):
    """a - b, the lower-rank shape being a trailing suffix of the other."""
    _check_suffix(a, b)
    return a - b


def mul(a, b):
    """a * b, the lower-rank shape being a trailing suffix of the other."""
    _check_suffix(a, b)
    return a * b


def scale(x, factor, bias=0.0):
    """factor * x + bias."""
    return factor * x + bias


def dropout_keep(shape, p, stream, per_sample=False, key=(0, 0, 0)):
    """The keep mask of pe.dropout for a tensor of `shape` (batch first) at
    key = (seed, step, first sample): runtime/include/stringrt/DropoutMask.h."""
    seed, step, first = key
    batch = shape[0]
    per_row = math.prod(shape[1:])
    samples = np.arange(first, first + batch, dtype=np.uint64)[:, None]
    elements = np.zeros((1, 1) if per_sample else (1, per_row), dtype=np.uint64)
    if not per_sample:
        elements[0] = np.arange(per_row, dtype=np.uint64)
    words = philox.block((elements // np.uint64(4), samples, step, 0x80000000 | stream),
                         (seed, seed >> 32))
    word = np.choose((elements % np.uint64(4)).astype(np.int64), words)
    keep = philox.uniform(word) >= p
    return torch.from_numpy(np.broadcast_to(keep, (batch, per_row)).reshape(shape).copy())


def dropout(x, p, stream, per_sample=False, key=(0, 0, 0)):
    """x * (1 / (1 - p)) where the mask keeps, exactly 0 where it drops; the
    factor rounded once from double to x's type."""
    keep = dropout_keep(tuple(x.shape), p, stream, per_sample, key).to(x.device)
    factor = torch.tensor(1.0 / (1.0 - p), dtype=torch.float64).to(x.dtype)
    return torch.where(keep, x * factor, torch.zeros((), dtype=x.dtype, device=x.device))


def mean(x, axis=None):
    """Mean over `axis` (removed), or over everything (a 0-d tensor)."""
    return x.mean() if axis is None else x.mean(dim=axis)


def patch_embed(image, w, b, patch):
    """Non-overlapping p x p patches in row-major order, flattened (c, py, px),
    then v W + b: [B, C, H, W] -> [B, (H/p)(W/p), D]."""
    B, C, H, W = image.shape
    p = patch
    if H % p or W % p:
        raise ValueError(f"patch {p} does not divide {H}x{W}")
    v = image.reshape(B, C, H // p, p, W // p, p)
    v = v.permute(0, 2, 4, 1, 3, 5).reshape(B, (H // p) * (W // p), C * p * p)
    return linear(v, w, b)


def token_embed(ids, table):
    """y[b, t] = table[ids[b, t]]."""
    return table[ids.long()]


def class_token(x, cls):
    """Prepend cls: [B, N, D] -> [B, N+1, D] with y[:, 0] = cls."""
    return torch.cat([cls.expand(x.shape[0], 1, cls.shape[-1]), x], dim=1)


def select_token(x, index=0):
    """x[:, index]: [B, T, D] -> [B, D]."""
    return x[:, index]


def cross_entropy(logits, labels, smoothing=0.0):
    """Mean over all positions of logsumexp(logits) - logits[label]; with
    label smoothing e, of logsumexp(logits) - sum_c target_c logits_c,
    target = (1 - e) onehot(label) + e / C (PyTorch's label_smoothing)."""
    C = logits.shape[-1]
    return F.cross_entropy(logits.reshape(-1, C), labels.reshape(-1).long(),
                           label_smoothing=smoothing)


# ------------------------------------------------------------- positions --

def seq_positions(length, special=0, dtype=torch.float32):
    """[special + length, 1]: 0 for the special tokens, then 0 .. length-1."""
    t = torch.arange(length, dtype=torch.float64)
    pos = torch.cat([torch.zeros(special, dtype=torch.float64), t])
    return pos.reshape(-1, 1).to(dtype)


def grid_positions(rows, cols, special=0, dtype=torch.float32):
    """[special + rows*cols, 2]: (0, 0) for special tokens, then patch t at
    (x, y) = (t % cols, t // cols)."""
    t = torch.arange(rows * cols, dtype=torch.int64)
    xy = torch.stack([t % cols, t // cols], dim=1).to(torch.float64)
    pos = torch.cat([torch.zeros(special, 2, dtype=torch.float64), xy])
    return pos.to(dtype)


def rope_freqs(kind, dim, heads=1, base=10000.0, dtype=torch.float32):
    """Rotary frequency table for `dim` = heads * Dh columns.

    seq:   [dim/2, 1]; pair i of each head (i < Dh/2) gets base^(-2i/Dh).
    axial: [dim/2, 2]; in each head, pair i < Dh/4 turns with x (column 0) at
           base^(-4i/Dh), pair Dh/4 + i with y (column 1) at the same
           frequency; the unused column is 0 (RoPE-ViT's axial layout).
    """
    if dim % heads:
        raise ValueError(f"heads {heads} does not divide dim {dim}")
    dh = dim // heads
    if kind == "seq":
        if dh % 2:
            raise ValueError(f"head width {dh} is odd")
        i = torch.arange(dh // 2, dtype=torch.float64)
        f = base ** (-2.0 * i / dh)
        return f.repeat(heads).reshape(-1, 1).to(dtype)
    if kind == "axial":
        if dh % 4:
            raise ValueError(f"head width {dh} is not a multiple of 4")
        q = dh // 4
        f = base ** (-4.0 * torch.arange(q, dtype=torch.float64) / dh)
        z = torch.zeros(q, dtype=torch.float64)
        head = torch.cat([torch.stack([f, z], 1), torch.stack([z, f], 1)])
        return head.repeat(heads, 1).to(dtype)
    raise ValueError(f"unknown rope_freqs kind {kind!r}")


def relative_positions(pos):
    """r[i, j] = pos[j] - pos[i]: [T, A] -> [T, T, A]."""
    return pos.unsqueeze(0) - pos.unsqueeze(1)


def sinusoidal(length, dim, base=10000.0, dtype=torch.float32):
    """PE[p, 2i] = sin(p / base^(2i/dim)), PE[p, 2i+1] = cos(p / base^(2i/dim))."""
    p = torch.arange(length, dtype=torch.float64).unsqueeze(1)
    i = torch.arange((dim + 1) // 2, dtype=torch.float64)
    ang = p / base ** (2.0 * i / dim)
    pe = torch.stack([torch.sin(ang), torch.cos(ang)], dim=-1).reshape(length, -1)
    return pe[:, :dim].to(dtype)


# ------------------------------------------------------------- rotations --

def _pairs(x):
    if x.shape[-1] % 2:
        raise ValueError(f"width {x.shape[-1]} is odd")
    return x.reshape(*x.shape[:-1], x.shape[-1] // 2, 2)


def rope(x, pos, freqs):
    """Rotate pair j of token t by theta_j(t) = sum_a pos[t, a] freqs[j, a]:
    (x0, x1) -> (x0 cos - x1 sin, x0 sin + x1 cos). x [..., T, D]."""
    theta = pos @ freqs.transpose(0, 1)                       # [T, D/2]
    c, s = torch.cos(theta), torch.sin(theta)
    xp = _pairs(x)
    x0, x1 = xp[..., 0], xp[..., 1]
    y = torch.stack([x0 * c - x1 * s, x0 * s + x1 * c], dim=-1)
    return y.reshape(x.shape)


def householder_matrix(a):
    """H(a) = I - 2 v v^T with v = (cos a, sin a): [...] -> [..., 2, 2]."""
    v = torch.stack([torch.cos(a), torch.sin(a)], dim=-1)
    eye = torch.eye(2, dtype=a.dtype, device=a.device)
    return eye - 2.0 * v.unsqueeze(-1) * v.unsqueeze(-2)


def householder(x, pos, f1, f2):
    """Pair j of token t multiplied by H(a2) H(a1), a_i = pos[t] . f_i[j]."""
    h1 = householder_matrix(pos @ f1.transpose(0, 1))          # [T, D/2, 2, 2]
    h2 = householder_matrix(pos @ f2.transpose(0, 1))
    m = h2 @ h1
    y = torch.einsum("tjab,...tjb->...tja", m, _pairs(x))
    return y.reshape(x.shape)


def _triu_flat(dim, device):
    """Flat indices (i*dim + j, j*dim + i) of the upper-triangle pairs (i, j),
    i < j, in row-major order."""
    iu = torch.triu_indices(dim, dim, 1, device=device)
    return iu[0] * dim + iu[1], iu[1] * dim + iu[0]


def _scatter_skew(p, dim, upper, lower):
    flat = p.new_zeros(*p.shape[:-1], dim * dim)
    flat = flat.index_add(-1, upper, p).index_add(-1, lower, -p)
    return flat.reshape(*p.shape[:-1], dim, dim)


def skew(p, dim):
    """S[..., i, j] = p[..., k], S[..., j, i] = -p[..., k] for the k-th pair
    (i, j), i < j, in row-major upper-triangle order."""
    k = dim * (dim - 1) // 2
    if p.shape[-1] != k:
        raise ValueError(f"skew of dim {dim} needs {k} parameters, got {p.shape[-1]}")
    return _scatter_skew(p, dim, *_triu_flat(dim, p.device))


def sparse_skew(p, dim, support):
    """As skew, but parameter m sits on upper-triangle index support[m]."""
    support = torch.as_tensor(list(support), dtype=torch.int64, device=p.device)
    if p.shape[-1] != support.numel():
        raise ValueError(f"{p.shape[-1]} parameters for a support of {support.numel()}")
    if support.numel() != support.unique().numel():
        raise ValueError("sparse_skew support has repeated indices")
    upper, lower = _triu_flat(dim, p.device)
    return _scatter_skew(p, dim, upper[support], lower[support])


def cayley(x, S):
    """U x on the last dim, U = (I - S)(I + S)^-1: solve (I + S) z = x, then
    y = (I - S) z."""
    d = S.shape[-1]
    eye = torch.eye(d, dtype=S.dtype, device=S.device)
    cols = x.reshape(-1, d).transpose(0, 1)                   # [D, N]
    z = torch.linalg.solve(eye + S, cols)
    y = (eye - S) @ z
    return y.transpose(0, 1).reshape(x.shape)


def generator_exp(r, L):
    """exp(sum_k r[..., k] L_k): r [..., K], L [K, d, d] -> [..., d, d]."""
    a = torch.einsum("...k,kij->...ij", r, L)
    return torch.linalg.matrix_exp(a)


def apply_rotation(x, R, heads):
    """Head slice h of token t becomes R[t] @ x[b, t, h]: x [B, T, D], R [T, Dh, Dh]."""
    B, T, D = x.shape
    xh = x.reshape(B, T, heads, D // heads)
    return torch.einsum("tij,bthj->bthi", R, xh).reshape(B, T, D)


def commutator_norm(L):
    """max over a < b of ||L_a L_b - L_b L_a||_F (0 when K < 2). The gradient
    flows through the first maximal pair in (a, b) row-major order."""
    K = L.shape[0]
    if K < 2:
        return L.sum() * 0.0
    a, b = torch.triu_indices(K, K, 1, device=L.device)
    c = L[a] @ L[b] - L[b] @ L[a]
    norms = torch.linalg.matrix_norm(c, ord="fro")
    return norms[torch.argmax(norms.detach())]


def spd_gate(x, gamma):
    """x * exp(gamma), gamma [D] or [T, D] broadcast over the leading dims."""
    _check_suffix(x, gamma)
    return x * torch.exp(gamma)


# ------------------------------------------------ gather ops (rewrites) --

def skip_gather(v, heads, skip_base):
    """Skip-n attention with its single key (pe-skip-gather): head s of token
    i is head s of token i - (skip_base + s) of v, zeros when negative."""
    B, T, D = v.shape
    dh = D // heads
    parts = []
    for s in range(heads):
        shift = skip_base + s
        head = v[:, :, s * dh:(s + 1) * dh]
        zeros = head.new_zeros(B, min(shift, T), dh)
        parts.append(torch.cat([zeros, head[:, :max(T - shift, 0)]], dim=1))
    return torch.cat(parts, dim=2)


def offset_table(offsets, rows, axes, dtype=torch.float32):
    """The [rows, axes] table of integer offsets (row-major)."""
    return torch.tensor(list(offsets), dtype=torch.float64).reshape(rows, axes).to(dtype)


def pair_gather(table, index, tokens):
    """y[i, j] = table[index[i*T + j]]: table [U, ...] -> [T, T, ...]."""
    idx = torch.as_tensor(list(index), dtype=torch.long, device=table.device)
    return table[idx].reshape(tokens, tokens, *table.shape[1:])


# ------------------------------------- hoisted / fused ops (pe-hoist, ...) --

def rope_table(pos, freqs):
    """table[t, j] = (cos, sin) of theta_j(t) = pos[t] . freqs[j]: [T, P, 2]."""
    theta = pos @ freqs.transpose(0, 1)
    return torch.stack([torch.cos(theta), torch.sin(theta)], dim=-1)


def rope_apply(x, table, inverse=False):
    """Pair j of token t times [[c, -s], [s, c]] (its transpose when inverse),
    (c, s) = table[t, j]. rope(x, pos, freqs) = rope_apply(x, rope_table(pos, freqs))."""
    c, s = table[..., 0], table[..., 1]
    if inverse:
        s = -s
    xp = _pairs(x)
    x0, x1 = xp[..., 0], xp[..., 1]
    return torch.stack([x0 * c - x1 * s, x0 * s + x1 * c], dim=-1).reshape(x.shape)


def cayley_weight(S):
    """W = U^T, U = (I - S)(I + S)^-1: cayley(x, S) = x @ cayley_weight(S)."""
    eye = torch.eye(S.shape[-1], dtype=S.dtype, device=S.device)
    return ((eye - S) @ torch.linalg.inv(eye + S)).transpose(0, 1)


def rope_attention(q, k, v, table, heads, scale=None, mask="none", return_lse=False):
    """attention(rope_apply(q, table), rope_apply(k, table), v); mask none or causal.
    With return_lse, (y, lse) as attention's."""
    if mask == "skip":
        raise ValueError("rope_attention: mask skip is not supported")
    return attention(rope_apply(q, table), rope_apply(k, table), v, heads, scale=scale,
                     mask=mask, return_lse=return_lse)


def linear_gelu(x, w, b=None, approximate=False):
    """(gelu(pre), pre) with pre = linear(x, w, b)."""
    pre = linear(x, w, b)
    return gelu(pre, approximate=approximate), pre


def linear_residual(residual, x, w, b=None):
    """residual + linear(x, w, b)."""
    return residual + linear(x, w, b)


# ------------------------------------------------------------- attention --

def attention_mask(T, heads, mask="none", skip_base=0, device=None):
    """Visibility [heads, T, T] (query i, key j): none: all; causal: j <= i;
    skip: head h sees only j = i - (skip_base + h)."""
    i = torch.arange(T, device=device).reshape(T, 1)
    j = torch.arange(T, device=device).reshape(1, T)
    if mask == "none":
        vis = torch.ones(T, T, dtype=torch.bool, device=device)
        return vis.expand(heads, T, T)
    if mask == "causal":
        return (j <= i).expand(heads, T, T)
    if mask == "skip":
        h = torch.arange(heads, device=device).reshape(heads, 1, 1)
        return j.unsqueeze(0) == i.unsqueeze(0) - (skip_base + h)
    raise ValueError(f"unknown mask {mask!r}")


def attention(q, k, v, heads, scale=None, mask="none", skip_base=0, rel=None,
              return_lse=False):
    """Multi-head attention: per head, s_ij = scale * q_i^T k_j (or
    q_i^T rel[i, j] k_j), y_i = sum_j softmax_j(s_ij | visible) v_j.
    scale defaults to 1/sqrt(Dh). A query with no visible key outputs exact
    zeros, with zero (never NaN) gradients. With return_lse, (y, lse): lse
    [B, heads, T] the log-sum-exp of each row's visible scores (-inf for a
    row without one), pe.attention's second result."""
    B, T, D = q.shape
    if D % heads:
        raise ValueError(f"heads {heads} does not divide {D}")
    dh = D // heads
    if scale is None:
        scale = 1.0 / math.sqrt(dh)

    def split(t):
        return t.reshape(B, T, heads, dh).transpose(1, 2)    # [B, H, T, Dh]

    qh, kh, vh = split(q), split(k), split(v)
    if rel is None:
        s = qh @ kh.transpose(-1, -2)
    else:
        rk = torch.einsum("ijde,bhje->bhijd", rel, kh)
        s = torch.einsum("bhid,bhijd->bhij", qh, rk)
    s = scale * s
    vis = attention_mask(T, heads, mask, skip_base, device=q.device)
    lse = torch.logsumexp(s.masked_fill(~vis, -math.inf), dim=-1)   # [B, H, T]
    s = s.masked_fill(~vis, torch.finfo(s.dtype).min)
    p = torch.softmax(s, dim=-1) * vis.to(s.dtype)
    y = (p @ vh).transpose(1, 2).reshape(B, T, D)            # [B, T, D]
    return (y, lse) if return_lse else y

