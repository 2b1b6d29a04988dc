"""PyTorch reference implementation of the backward ops of docs/autodiff.md.

One function per backward `pe` op, written with the explicit formulas the
C++ and CUDA kernels follow: nothing here calls torch.autograd.
test_pe_torch_grad.py checks every function against torch.autograd of the
forward function in pe_torch.py. The conventions are those of pe_torch
(activations [B, T, D], heads as contiguous column slices, interleaved
rotary pairs, vectors as columns, row-major upper-triangle skew order);
`dy` is always the gradient of the forward op's result.
"""

import math

import torch

import pe_torch as pt

__all__ = [
    "sum_to", "broadcast_to", "expand_axis", "mean_grad", "linear_grad_input",
    "linear_grad_weight", "layer_norm_grad", "gelu_grad", "relu_grad",
    "patch_embed_grad", "token_embed_grad", "class_token_grad",
    "select_token_grad", "rope_grad_freqs", "householder_grad_freqs",
    "skew_grad", "sparse_skew_grad", "cayley_grad", "generator_exp_grad",
    "apply_rotation_grad", "commutator_norm_grad", "spd_gate_grad",
    "attention_grad", "cross_entropy_grad", "skip_gather_grad",
    "pair_gather_grad",
]


# ------------------------------------------------------------ broadcasting --

def _lead(x, n):
    """The number of leading dims of x in front of a trailing part of rank n."""
    if n > x.dim():
        raise ValueError(f"rank {n} does not fit in shape {tuple(x.shape)}")
    return x.dim() - n


def sum_to(x, shape):
    """Sum over the leading dims of x, keeping its trailing `shape` (the
    adjoint of suffix broadcasting): [..., S] -> S."""
    shape = tuple(shape)
    lead = _lead(x, len(shape))
    if tuple(x.shape[lead:]) != shape:
        raise ValueError(f"{shape} is not a trailing suffix of {tuple(x.shape)}")
    return x.sum(dim=tuple(range(lead))) if lead else x.clone()


def broadcast_to(x, shape):
    """Repeat x over the new leading dims of `shape` (x's shape a trailing
    suffix of it, or x a scalar)."""
    shape = tuple(shape)
    if x.dim() > len(shape) or tuple(shape[len(shape) - x.dim():]) != tuple(x.shape):
        raise ValueError(f"{tuple(x.shape)} is not a trailing suffix of {shape}")
    return x.expand(shape).clone()


def expand_axis(x, axis, size):
    """x with a new dim of `size` at `axis`, every slice equal to x (the
    adjoint of summing over `axis`; mean's adjoint once scaled by 1/size)."""
    if not 0 <= axis <= x.dim():
        raise ValueError(f"axis {axis} out of range for rank {x.dim()}")
    shape = list(x.shape)
    shape.insert(axis, size)
    return x.unsqueeze(axis).expand(shape).clone()


def mean_grad(x, dy, axis=None):
    """dx = dy repeated over the averaged elements of x, divided by their
    count N: with `axis`, dy has x's shape without it and N = x.shape[axis];
    without, dy is a scalar and N = x.numel(). Only x's shape is read, as
    the kernel reads the batch size from it at run time."""
    if axis is None:
        if dy.dim():
            raise ValueError(f"dy must be a scalar for a mean over everything, got {tuple(dy.shape)}")
        return broadcast_to(dy, x.shape) / x.numel()
    if not 0 <= axis < x.dim():
        raise ValueError(f"axis {axis} out of range for rank {x.dim()}")
    want = x.shape[:axis] + x.shape[axis + 1:]
    if tuple(dy.shape) != tuple(want):
        raise ValueError(f"dy has shape {tuple(dy.shape)}, expected {tuple(want)}")
    return expand_axis(dy, axis, x.shape[axis]) / x.shape[axis]


# ---------------------------------------------------------------- layers --

def linear_grad_input(dy, w):
    """dx = dy W^T: dy [..., O], w [I, O] -> [..., I]."""
    return torch.matmul(dy, w.transpose(0, 1))


def linear_grad_weight(x, dy):
    """dW = sum over the leading dims of x^T dy: x [..., I], dy [..., O] -> [I, O]."""
    return x.reshape(-1, x.shape[-1]).transpose(0, 1) @ dy.reshape(-1, dy.shape[-1])


def layer_norm_grad(x, gamma, dy, eps=1e-5):
    """With xhat = (x - mu) r, r = (var + eps)^-1/2 over the last dim and
    g = dy gamma:  dx = r (g - mean(g) - xhat mean(g xhat)),
    dgamma = sum_lead dy xhat,  dbeta = sum_lead dy."""
    mu = x.mean(dim=-1, keepdim=True)
    var = ((x - mu) ** 2).mean(dim=-1, keepdim=True)
    r = 1.0 / torch.sqrt(var + eps)
    xhat = (x - mu) * r
    g = dy * gamma
    dx = r * (g - g.mean(dim=-1, keepdim=True)
              - xhat * (g * xhat).mean(dim=-1, keepdim=True))
    return dx, sum_to(dy * xhat, gamma.shape), sum_to(dy, gamma.shape)


def gelu_grad(x, dy, approximate=False):
    """dy gelu'(x). erf form: Phi(x) + x phi(x). tanh form, u = k (x + c x^3),
    k = sqrt(2/pi), c = 0.044715: (1 + tanh u)/2 + x (1 - tanh^2 u) k (1 + 3 c x^2)/2."""
    if approximate:
        k, c = math.sqrt(2.0 / math.pi), 0.044715
        t = torch.tanh(k * (x + c * x ** 3))
        d = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * c * x * x)
    else:
        cdf = 0.5 * (1 + torch.erf(x / math.sqrt(2.0)))
        pdf = torch.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
        d = cdf + x * pdf
    return dy * d


def relu_grad(x, dy):
    """dy (x > 0): no gradient at x = 0."""
    return torch.where(x > 0, dy, torch.zeros_like(dy))


def _patches(image, patch):
    """[B, C, H, W] -> [B, N, C*p*p], rows as pe_torch.patch_embed flattens them."""
    B, C, H, W = image.shape
    p = patch
    if H % p or W % p:
        raise ValueError(f"patch {p} does not divide {H}x{W}")
    v = image.reshape(B, C, H // p, p, W // p, p)
    return v.permute(0, 2, 4, 1, 3, 5).reshape(B, (H // p) * (W // p), C * p * p)


def patch_embed_grad(image, dy, patch):
    """dw = sum_{b,n} patch(b,n)^T dy[b,n] [C*p*p, D], db = sum_{b,n} dy [D]."""
    return linear_grad_weight(_patches(image, patch), dy), sum_to(dy, dy.shape[-1:])


def token_embed_grad(ids, dy, vocab):
    """dtable [vocab, D]: row v is the sum of dy[b, t] over the (b, t) with ids[b, t] = v."""
    D = dy.shape[-1]
    flat = ids.reshape(-1).long()
    if flat.numel() and (flat.min() < 0 or flat.max() >= vocab):
        raise ValueError(f"token id out of range [0, {vocab})")
    return dy.new_zeros(vocab, D).index_add(0, flat, dy.reshape(-1, D))


def class_token_grad(dy):
    """dx = dy[:, 1:], dcls = sum_b dy[b, 0]: [B, N+1, D] -> [B, N, D], [D]."""
    return dy[:, 1:].clone(), dy[:, 0].sum(dim=0)


def select_token_grad(dy, index, tokens):
    """[B, D] -> [B, tokens, D]: zeros, with dy at token `index`."""
    if not 0 <= index < tokens:
        raise ValueError(f"index {index} out of range for {tokens} tokens")
    dx = dy.new_zeros(dy.shape[0], tokens, dy.shape[-1])
    dx[:, index] = dy
    return dx


def cross_entropy_grad(logits, labels, dy, smoothing=0.0):
    """dlogits = dy (softmax(logits) - target) / N, N the number of
    positions (logits.numel() / C), target = (1 - e) onehot(labels) + e / C
    with e the label smoothing."""
    C = logits.shape[-1]
    n = logits.numel() // C
    p = torch.softmax(logits, dim=-1)
    onehot = torch.zeros_like(p).scatter_(-1, labels.long().unsqueeze(-1), 1.0)
    target = (1.0 - smoothing) * onehot + smoothing / C
    return dy * (p - target) / n


# ------------------------------------------------------------- rotations --

def rope_grad_freqs(x, pos, freqs, dy):
    """theta_j(t) = pos[t] . freqs[j]; with y = R(theta) x, R'(theta) x = (-y1, y0)
    for each pair, so dtheta_j(t) = sum_lead (dy1 y0 - dy0 y1), and
    dfreqs[j, a] = sum_t pos[t, a] dtheta_j(t). x, dy [..., T, D] -> [D/2, A]."""
    yp = pt._pairs(pt.rope(x, pos, freqs))
    gp = pt._pairs(dy)
    dtheta = gp[..., 1] * yp[..., 0] - gp[..., 0] * yp[..., 1]        # [..., T, D/2]
    dtheta = dtheta.reshape(-1, *dtheta.shape[-2:]).sum(dim=0)          # [T, D/2]
    return dtheta.transpose(0, 1) @ pos


def householder_grad_freqs(x, pos, f1, f2, dy):
    """H(a2) H(a1) = R(2 (a2 - a1)): householder is rope with frequencies
    F = 2 (f2 - f1). With G = rope_grad_freqs(x, pos, F, dy), df2 = 2 G and
    df1 = -2 G."""
    g = rope_grad_freqs(x, pos, 2.0 * (f2 - f1), dy)
    return -2.0 * g, 2.0 * g


def skew_grad(dS, dim):
    """dp_k = dS[..., i, j] - dS[..., j, i] for the k-th upper-triangle pair
    (i, j): [..., dim, dim] -> [..., dim(dim-1)/2]."""
    i, j = torch.triu_indices(dim, dim, 1, device=dS.device)
    return dS[..., i, j] - dS[..., j, i]


def sparse_skew_grad(dS, dim, support):
    """skew_grad at the upper-triangle indices in `support`: [dim, dim] -> [K]."""
    support = torch.as_tensor(list(support), dtype=torch.int64, device=dS.device)
    return skew_grad(dS, dim)[..., support]


def cayley_grad(x, S, dy):
    """y = U x with U = (I - S)(I + S)^-1 = (I + S)^-1 (I - S), per token.
    z = (I + S)^-1 x;  dx = U^T dy, i.e. solve (I + S)^T dx = (I - S)^T dy
    (= (I - S)^-1 (I + S) dy for skew S);  dS = -sum_tokens (dy + dx) z^T."""
    d = S.shape[-1]
    eye = torch.eye(d, dtype=S.dtype, device=S.device)
    xc = x.reshape(-1, d).transpose(0, 1)                     # [D, N] columns
    gc = dy.reshape(-1, d).transpose(0, 1)
    z = torch.linalg.solve(eye + S, xc)
    dxc = torch.linalg.solve((eye + S).transpose(0, 1), (eye - S).transpose(0, 1) @ gc)
    dS = -(gc + dxc) @ z.transpose(0, 1)
    return dxc.transpose(0, 1).reshape(x.shape), dS


def generator_exp_grad(r, L, dR):
    """R(r) = exp(A), A = sum_k r_k L_k. dA = the Frechet derivative of exp at
    A^T applied to dR, the top-right block of exp([[A^T, dR], [0, A^T]]);
    dL_k = sum over r's leading dims of r_k dA. r [..., K], L [K, d, d]."""
    d = L.shape[-1]
    a = torch.einsum("...k,kij->...ij", r, L).transpose(-1, -2)
    block = a.new_zeros(*a.shape[:-2], 2 * d, 2 * d)
    block[..., :d, :d] = a
    block[..., d:, d:] = a
    block[..., :d, d:] = dR
    dA = torch.linalg.matrix_exp(block)[..., :d, d:]
    return torch.einsum("...k,...ij->kij", r, dA)


def apply_rotation_grad(x, R, dy, heads):
    """y_h(t) = R[t] x_h(t):  dx_h = R[t]^T dy_h,  dR[t] = sum_{b,h} dy_h x_h^T."""
    B, T, D = x.shape
    xh = x.reshape(B, T, heads, D // heads)
    gh = dy.reshape(B, T, heads, D // heads)
    dx = torch.einsum("tji,bthj->bthi", R, gh).reshape(B, T, D)
    dR = torch.einsum("bthi,bthj->tij", gh, xh)
    return dx, dR


def skip_gather_grad(dy, heads, skip_base):
    """The reverse shift: dv[b, j, head s] = dy[b, j + skip_base + s, head s],
    zeros past the end."""
    B, T, D = dy.shape
    dh = D // heads
    parts = []
    for s in range(heads):
        shift = skip_base + s
        head = dy[:, :, s * dh:(s + 1) * dh]
        zeros = head.new_zeros(B, min(shift, T), dh)
        parts.append(torch.cat([head[:, min(shift, T):], zeros], dim=1))
    return torch.cat(parts, dim=2)


def pair_gather_grad(dy, index, rows):
    """Scatter-add: dtable[u] = sum of dy[i, j] over the pairs with
    index[i*T + j] = u; dy [T, T, ...] -> [rows, ...]."""
    T = dy.shape[0]
    flat = dy.reshape(T * T, *dy.shape[2:])
    out = flat.new_zeros(rows, *dy.shape[2:])
    idx = torch.as_tensor(list(index), dtype=torch.long, device=dy.device)
    return out.index_add(0, idx, flat)


def commutator_norm_grad(L, dy):
    """Through the first maximal pair (a, b), a < b, in row-major order: with
    C = L_a L_b - L_b L_a and G = dy C / ||C||_F,
    dL_a = G L_b^T - L_b^T G,  dL_b = L_a^T G - G L_a^T; zero when C = 0."""
    K = L.shape[0]
    dL = torch.zeros_like(L)
    if K < 2:
        return dL
    ia, ib = torch.triu_indices(K, K, 1, device=L.device)
    c = L[ia] @ L[ib] - L[ib] @ L[ia]
    norms = torch.linalg.matrix_norm(c, ord="fro")
    m = int(torch.argmax(norms))                 # the first maximum
    norm = norms[m]
    if norm == 0:
        return dL
    a, b = int(ia[m]), int(ib[m])
    G = dy * c[m] / norm
    La, Lb = L[a], L[b]
    dL[a] += G @ Lb.transpose(0, 1) - Lb.transpose(0, 1) @ G
    dL[b] += La.transpose(0, 1) @ G - G @ La.transpose(0, 1)
    return dL


def spd_gate_grad(x, gamma, dy):
    """y = x exp(gamma):  dx = dy exp(gamma),  dgamma = sum_lead dy x exp(gamma)."""
    e = torch.exp(gamma)
    return dy * e, sum_to(dy * x * e, gamma.shape)


# ------------------------------------------------------------- attention --

def attention_grad(q, k, v, y, lse, dy, heads, scale=None, mask="none", skip_base=0, rel=None):
    """Backward of pe_torch.attention from its saved result y and log-sum-exp
    lse [B, heads, T] (FlashAttention-2's backward, as pe.attention_grad):
    s_ij = scale q_i^T R_ij k_j (R_ij = I without rel), P_ij = exp(s_ij -
    lse_i) over the visible keys (0 elsewhere; a row without one is all zero),
    D_i = dy_i . y_i (= sum_l P_il dP_il for the forward's y),
      dv_j = sum_i P_ij dy_i,   dP_ij = dy_i . v_j,
      ds_ij = P_ij (dP_ij - D_i),
      dq_i = scale sum_j ds_ij R_ij k_j,   dk_j = scale sum_i ds_ij R_ij^T q_i,
      drel[i, j] = scale sum_{b,h} ds_ij q_i k_j^T.
    Returns (dq, dk, dv), plus drel when rel is given."""
    B, T, D = q.shape
    if D % heads:
        raise ValueError(f"heads {heads} does not divide {D}")
    dh = D // heads
    if scale is None:
        scale = 1.0 / math.sqrt(dh)

    def split(t):
        return t.reshape(B, T, heads, dh).transpose(1, 2)    # [B, H, T, Dh]

    def merge(t):
        return t.transpose(1, 2).reshape(B, T, D)

    qh, kh, vh, yh, gh = split(q), split(k), split(v), split(y), split(dy)
    if rel is None:
        s = qh @ kh.transpose(-1, -2)
    else:
        rk = torch.einsum("ijde,bhje->bhijd", rel, kh)        # R_ij k_j
        s = torch.einsum("bhid,bhijd->bhij", qh, rk)
    s = scale * s
    vis = pt.attention_mask(T, heads, mask, skip_base, device=q.device)
    # Hidden keys (and rows without a key, lse = -inf) are exactly 0.
    p = torch.where(vis, torch.exp(s - lse.unsqueeze(-1)), torch.zeros((), dtype=s.dtype))
    dv = p.transpose(-1, -2) @ gh
    dp = gh @ vh.transpose(-1, -2)
    ds = p * (dp - (gh * yh).sum(dim=-1, keepdim=True))
    if rel is None:
        dq = scale * (ds @ kh)
        dk = scale * (ds.transpose(-1, -2) @ qh)
        return merge(dq), merge(dk), merge(dv)
    dq = scale * torch.einsum("bhij,bhijd->bhid", ds, rk)
    rq = torch.einsum("ijde,bhid->bhije", rel, qh)            # R_ij^T q_i
    dk = scale * torch.einsum("bhij,bhije->bhje", ds, rq)
    drel = scale * torch.einsum("bhij,bhid,bhje->ijde", ds, qh, kh)
    return merge(dq), merge(dk), merge(dv), drel


# --------------------------------------- hoisted / fused ops (pe-hoist, ...) --

def rope_table_grad(pos, freqs, dy):
    """dtheta_j(t) = -sin theta dy[t, j, 0] + cos theta dy[t, j, 1];
    dfreqs[j, a] = sum_t pos[t, a] dtheta_j(t)."""
    theta = pos @ freqs.transpose(0, 1)
    dtheta = -torch.sin(theta) * dy[..., 0] + torch.cos(theta) * dy[..., 1]
    return dtheta.transpose(0, 1) @ pos


def rope_apply_grad_table(x, dy, inverse=False):
    """dtable[t, j] = sum_lead (dy0 x0 + dy1 x1, +-(dy1 x0 - dy0 x1)), minus
    for the inverse rotation. x, dy [..., T, D] -> [T, D/2, 2]."""
    xp, dp = pt._pairs(x), pt._pairs(dy)
    x0, x1, d0, d1 = xp[..., 0], xp[..., 1], dp[..., 0], dp[..., 1]
    sign = -1.0 if inverse else 1.0
    dc = (d0 * x0 + d1 * x1).reshape(-1, *x0.shape[-2:]).sum(0)
    ds = (sign * (d1 * x0 - d0 * x1)).reshape(-1, *x0.shape[-2:]).sum(0)
    return torch.stack([dc, ds], dim=-1)


def cayley_weight_grad(S, dw, weight=None):
    """W = U^T, M = (I + S)^-1, U = (I - S) M: ds = -(M dw (I + U))^T.

    `weight` (the forward's W, which pe-autodiff passes) is not needed here:
    the oracle refactors, as the CPU kernels do."""
    eye = torch.eye(S.shape[-1], dtype=S.dtype, device=S.device)
    m = torch.linalg.inv(eye + S)
    u = (eye - S) @ m
    return -(m @ dw @ (eye + u)).transpose(0, 1)


def rope_attention_grad(q, k, v, table, y, lse, dy, heads, scale=None, mask="none"):
    """attention_grad on the rotated q, k (with the forward's y and lse); dq,
    dk turned back by R^T."""
    qr, kr = pt.rope_apply(q, table), pt.rope_apply(k, table)
    dqr, dkr, dv = attention_grad(qr, kr, v, y, lse, dy, heads, scale=scale, mask=mask)
    return pt.rope_apply(dqr, table, inverse=True), pt.rope_apply(dkr, table, inverse=True), dv
