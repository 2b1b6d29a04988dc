#!/usr/bin/env python3
"""How far PyTorch's own bf16 autocast moves one step's loss and gradients
from float32, per parameter tensor, on the ViT peers of tests/bench/torch_vit.py:
the yardstick for stringrun's bf16 gradient tolerance (DeviceRun.h).

    python3 tests/bench/bf16_gradient_error.py [--model vit_s_rope] [--batch 16]
        [--device cuda|cpu] [--seeds 3]

Prints, per seed, the loss's relative change and the largest per-tensor
relative error max|g_bf16 - g_f32| / max|g_f32| (the measure stringrun
gradients uses), with the tensors that reach it."""
import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_vit  # noqa: E402

MODELS = {
    "vit_rope": {},
    "vit_s_rope": {"dim": 384, "heads": 6, "depth": 12, "mlp": 1536, "patch": 2},
}


def loss_and_grads(net, images, labels, bf16, device):
    net.zero_grad(set_to_none=True)
    with torch.autocast(device, dtype=torch.bfloat16, enabled=bf16):
        loss = F.cross_entropy(net(images), labels)
    loss.backward()
    return loss.item(), {n: p.grad.detach().double().clone() for n, p in net.named_parameters()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="vit_s_rope", choices=sorted(MODELS))
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    print(f"PyTorch {torch.__version__} bf16 autocast vs float32, {args.model}, batch {args.batch}, "
          f"{args.device}")
    for seed in range(args.seeds):
        torch.manual_seed(seed)
        net = torch_vit.ViT(sdpa=hasattr(F, "scaled_dot_product_attention"), **MODELS[args.model]).to(args.device)
        images = torch.rand(args.batch, 1, 28, 28, device=args.device)
        labels = torch.randint(0, 10, (args.batch,), device=args.device)
        loss32, g32 = loss_and_grads(net, images, labels, False, args.device)
        loss16, g16 = loss_and_grads(net, images, labels, True, args.device)
        errors = sorted(((g16[n] - g32[n]).abs().max().item() / max(g32[n].abs().max().item(), 1e-12), n)
                        for n in g32)
        worst = ", ".join(f"{n} {e:.3f}" for e, n in errors[-4:][::-1])
        print(f"seed {seed}: loss {loss32:.6f} vs {loss16:.6f} (relative {abs(loss16 - loss32) / abs(loss32):.2e}); "
              f"worst gradients: {worst}")


if __name__ == "__main__":
    main()
