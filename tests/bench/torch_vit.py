"""The ViT examples written as idiomatic eager PyTorch: the benchmark's peer.

(GeneratorViT, at the end: examples/vit_generators.pe.)

Same architecture, sizes and math as examples/vit_rope.pe (and vit_cayley.pe):
pre-norm encoder blocks, 2D axial RoPE on Q and K (interleaved pairs, RoPE-ViT
axial layout, CLS unrotated), multi-head softmax attention, GELU MLP, CLS head.
Written the way a researcher would write it (nn.Linear, F.layer_norm, ...), not
through the oracle's op-by-op functions, so the comparison is with PyTorch as
people use it.
"""
import math
import os
import re

import torch
import torch.nn as nn
import torch.nn.functional as F


def axial_rope_tables(grid, dim, heads, base=100.0, special=1):
    """cos/sin tables [T, D/2] for the axial layout; special tokens unrotated."""
    dh = dim // heads
    quarter = dh // 4
    freqs = base ** (-4.0 * torch.arange(quarter, dtype=torch.float64) / dh)
    t = torch.arange(grid * grid)
    x, y = (t % grid).double(), (t // grid).double()
    per_head = torch.cat([x[:, None] * freqs[None], y[:, None] * freqs[None]], dim=1)
    angles = per_head.repeat(1, heads)                      # [N, D/2]
    angles = torch.cat([torch.zeros(special, dim // 2, dtype=torch.float64), angles])
    return torch.cos(angles).float(), torch.sin(angles).float()


def apply_rope(x, cos, sin):
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).flatten(-2)


def cayley_apply(x, s_params, dim):
    """U x with U = (I - S)(I + S)^-1, S skew from the upper-triangle params."""
    iu = torch.triu_indices(dim, dim, 1, device=x.device)
    s = torch.zeros(dim, dim, dtype=x.dtype, device=x.device)
    s = s.index_put((iu[0], iu[1]), s_params).index_put((iu[1], iu[0]), -s_params)
    eye = torch.eye(dim, dtype=x.dtype, device=x.device)
    flat = x.reshape(-1, dim).T                             # [D, B*T]
    z = torch.linalg.solve(eye + s, flat)
    return ((eye - s) @ z).T.reshape(x.shape)


def drop_path(x, p, training):
    """Stochastic depth as timm writes it: each sample kept with probability
    1 - p and scaled by 1 / (1 - p), or zeroed."""
    if p == 0.0 or not training:
        return x
    keep = x.new_empty((x.shape[0],) + (1,) * (x.dim() - 1)).bernoulli_(1.0 - p)
    return x * keep / (1.0 - p)


# vit_rope with dropout(p = 0.3) on each MLP's hidden layer and
# drop_path(p = 0.25) on its output: the variant of tests/cuda/CMakeLists.txt,
# scripts/gpu_packages.sh and the oracle (vit_rope_dropout.pe).
DROPOUT_VARIANT = {"dropout": 0.3, "drop_path": 0.25}
VIT_MLP_LINE = "return x + linear(gelu(linear(h, w1, b1)), w2, b2)"
VIT_DROPOUT_MLP_LINE = ("return x + drop_path(linear(dropout(gelu(linear(h, w1, b1)), p = 0.3), "
                        "w2, b2), p = 0.25)")


def vit_rope_dropout_source(vit_rope_text):
    """examples/vit_rope.pe's text with the dropout variant's MLP line."""
    if VIT_MLP_LINE not in vit_rope_text:
        raise ValueError("examples/vit_rope.pe no longer has the line " + VIT_MLP_LINE)
    return vit_rope_text.replace(VIT_MLP_LINE, VIT_DROPOUT_MLP_LINE)


EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__)))), "examples")
SMOOTHING = re.compile(r"^loss cross_entropy\([^)]*smoothing = ([0-9.eE+-]+)\)", re.M)


def example_name(model):
    """The example behind `model` (examples/NAME.pe): vit_rope_dropout is
    vit_rope.pe with one line replaced, the others are their own file."""
    return "vit_rope" if model == "vit_rope_dropout" else model


def example_source(model):
    with open(os.path.join(EXAMPLES, example_name(model) + ".pe")) as f:
        return f.read()


def label_smoothing(model):
    """The label smoothing of the example behind `model`, 0 where its loss has
    none, so that the peer's loss is the example's:
    F.cross_entropy(..., label_smoothing=...)."""
    match = SMOOTHING.search(example_source(model))
    return float(match.group(1)) if match else 0.0


ADAMW = re.compile(r"^optimizer adamw\(lr = ([0-9.eE+-]+), weight_decay = ([0-9.eE+-]+)", re.M)


def adamw_settings(model):
    """The AdamW learning rate and weight decay of the example behind `model`,
    so that the peer's optimizer step is the example's:
    torch.optim.AdamW(params, **adamw_settings(model))."""
    match = ADAMW.search(example_source(model))
    if not match:
        raise ValueError(f"examples/{example_name(model)}.pe declares no "
                         "`optimizer adamw(lr = ..., weight_decay = ...)`")
    return {"lr": float(match.group(1)), "weight_decay": float(match.group(2))}


class Block(nn.Module):
    def __init__(self, dim, heads, mlp, cayley, sdpa=False, dropout=0.0, drop_path=0.0):
        super().__init__()
        self.heads = heads
        self.sdpa = sdpa
        self.dropout, self.drop_path = dropout, drop_path
        self.ln1 = nn.LayerNorm(dim)
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, dim, bias=False)
        self.wv = nn.Linear(dim, dim, bias=False)
        self.wo = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, mlp)
        self.fc2 = nn.Linear(mlp, dim)
        self.s = nn.Parameter(torch.randn(dim * (dim - 1) // 2) * 0.01) if cayley else None

    def forward(self, x, cos, sin):
        b, t, d = x.shape
        h = self.ln1(x)
        q = apply_rope(self.wq(h), cos, sin)
        k = apply_rope(self.wk(h), cos, sin)
        if self.s is not None:
            q = cayley_apply(q, self.s, d)
            k = cayley_apply(k, self.s, d)
        v = self.wv(h)
        split = lambda z: z.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        q, k, v = split(q), split(k), split(v)
        if self.sdpa:  # PyTorch's fused attention (flash / memory-efficient on GPUs)
            a = F.scaled_dot_product_attention(q, k, v)
        else:
            scores = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
            a = scores.softmax(dim=-1) @ v
        a = a.transpose(1, 2).reshape(b, t, d)
        x = x + self.wo(a)
        h = F.dropout(F.gelu(self.fc1(self.ln2(x))), self.dropout, self.training)
        return x + drop_path(self.fc2(h), self.drop_path, self.training)


class ViT(nn.Module):
    """examples/vit_rope.pe (cayley=False) and examples/vit_cayley.pe (cayley=True)."""

    def __init__(self, dim=64, heads=4, depth=4, mlp=128, patch=4, classes=10, cayley=False,
                 sdpa=False, dropout=0.0, drop_path=0.0):
        super().__init__()
        self.patch = patch
        grid = 28 // patch
        self.embed = nn.Linear(patch * patch, dim)
        self.cls = nn.Parameter(torch.randn(dim) * 0.02)
        self.blocks = nn.ModuleList(Block(dim, heads, mlp, cayley, sdpa, dropout, drop_path)
                                    for _ in range(depth))
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)
        cos, sin = axial_rope_tables(grid, dim, heads)
        self.register_buffer("cos", cos)
        self.register_buffer("sin", sin)

    def forward(self, image):
        b = image.shape[0]
        p = self.patch
        patches = image.unfold(2, p, p).unfold(3, p, p)            # [B, 1, g, g, p, p]
        patches = patches.reshape(b, -1, p * p)                    # row-major patches
        x = torch.cat([self.cls.expand(b, 1, -1), self.embed(patches)], dim=1)
        for block in self.blocks:
            x = block(x, self.cos, self.sin)
        return self.head(self.ln(x)[:, 0])


def skew_matrices(params, dim):
    """[K, P] upper-triangle parameters -> [K, dim, dim] skew-symmetric
    matrices (row-major pairs (i, j), i < j, as the language's skew)."""
    i, j = torch.triu_indices(dim, dim, 1)
    L = params.new_zeros(params.shape[0], dim, dim)
    L[:, i, j] = params
    L[:, j, i] = -params
    return L


class GeneratorBlock(Block):
    """A pre-norm block whose attention scores are q_i^T R_ij k_j with the
    per-pair rotations R [T, T, Dh, Dh] (no RoPE)."""

    def __init__(self, dim, heads, mlp):
        super().__init__(dim, heads, mlp, cayley=False)

    def forward(self, x, R):
        b, t, d = x.shape
        dh = d // self.heads
        h = self.ln1(x)
        split = lambda z: z.view(b, t, self.heads, dh).transpose(1, 2)   # [B, H, T, Dh]
        q, k, v = split(self.wq(h)), split(self.wk(h)), split(self.wv(h))
        # The fastest form found (tests/bench/README.md): u_i = q_i^T R_i for
        # every query row i as one batched GEMM, then the dot with k_j.
        qi = q.permute(2, 0, 1, 3).reshape(t, b * self.heads, dh)           # [T, BH, Dh]
        Ri = R.permute(0, 2, 1, 3).reshape(t, dh, t * dh)                   # [T, Dh, T*Dh]
        u = torch.bmm(qi, Ri).reshape(t, b, self.heads, t, dh)
        scores = (u * k.unsqueeze(0)).sum(-1).permute(1, 2, 0, 3) / math.sqrt(dh)
        a = scores.softmax(dim=-1) @ v
        a = a.transpose(1, 2).reshape(b, t, d)
        x = x + self.wo(a)
        h = F.gelu(self.fc1(self.ln2(x)))
        return x + self.fc2(h)


class GeneratorViT(nn.Module):
    """examples/vit_generators.pe: one learned skew generator per image axis,
    R_ij = exp(sum_a (p_j - p_i)_a L_a) (matrix_exp of the distinct offsets
    only, gathered to every pair, as stringc's pe-distinct-offsets), shared
    by every layer, and the commutator penalty lambda ||L_0 L_1 - L_1 L_0||_F
    in the loss (GeneratorViT.penalty())."""

    def __init__(self, dim=64, heads=4, depth=4, mlp=128, patch=4, classes=10, lam=0.01):
        super().__init__()
        self.patch, self.heads, self.lam = patch, heads, lam
        grid = 28 // patch
        dh = dim // heads
        self.embed = nn.Linear(patch * patch, dim)
        self.cls = nn.Parameter(torch.randn(dim) * 0.02)
        self.gen = nn.Parameter(torch.randn(2, dh * (dh - 1) // 2) * 0.05)
        self.blocks = nn.ModuleList(GeneratorBlock(dim, heads, mlp) for _ in range(depth))
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)
        cells = torch.arange(grid * grid)
        pos = torch.cat([torch.zeros(1, 2), torch.stack([cells % grid, cells // grid], 1).float()])
        offsets = pos.unsqueeze(0) - pos.unsqueeze(1)                       # [T, T, 2]
        distinct, index = torch.unique(offsets.reshape(-1, 2), dim=0, return_inverse=True)
        self.register_buffer("offsets", distinct)                           # [U, 2]
        self.register_buffer("pair_index", index)                           # [T * T]
        self.tokens = pos.shape[0]

    def generators(self):
        return skew_matrices(self.gen, self.embed.out_features // self.heads)

    def penalty(self):
        L = self.generators()
        return self.lam * torch.linalg.matrix_norm(L[0] @ L[1] - L[1] @ L[0])

    def forward(self, image):
        b = image.shape[0]
        p = self.patch
        L = self.generators()
        R = torch.linalg.matrix_exp(torch.einsum("uk,kij->uij", self.offsets, L))
        R = R[self.pair_index].reshape(self.tokens, self.tokens, *L.shape[1:])
        patches = image.unfold(2, p, p).unfold(3, p, p).reshape(b, -1, p * p)
        x = torch.cat([self.cls.expand(b, 1, -1), self.embed(patches)], dim=1)
        for block in self.blocks:
            x = block(x, R)
        return self.head(self.ln(x)[:, 0])
