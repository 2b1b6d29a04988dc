"""The EMA of the weights (optimizer ema = d, Optimizer.h) against PyTorch.

Trains a tiny classifier (tests/lit/stringc/Inputs/tiny_mlp.pe with `ema = 0.7`
and a constant schedule, so that a run of k steps is the first k steps of a
longer one) with `stringrun train --steps k --checkpoint` for k = 1..STEPS:
the weights after every step. PyTorch's AveragedModel with the EMA average
`d * avg + (1 - d) * w`, updated with them in turn (its first update copies
the weights), must give the checkpoint's EMA (`ema.*`) at step STEPS; and
`stringrun eval --resume CHECKPOINT --ema` must report the loss that
`stringrun eval --params` gives for those EMA weights. Skips itself when the
tools are not built.
"""

import os
import re
import subprocess
import sys
import tempfile
import unittest

import torch
from torch.optim.swa_utils import AveragedModel

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
INPUTS = os.path.join(REPO, "tests", "lit", "stringc", "Inputs")
sys.path.insert(0, HERE)
from safetensors_io import read_safetensors, save_safetensors  # noqa: E402
from test_runtime_vs_torch import find_tools  # noqa: E402

DECAY = 0.7
STEPS = 4
# tiny_mlp.pe's optimizer and schedule, and what this test trains with.
EDITS = [
    ("optimizer adamw(lr = 0.05, weight_decay = 0.01, clip = 1.0)",
     f"optimizer adamw(lr = 0.05, weight_decay = 0.01, clip = 1.0, ema = {DECAY})"),
    ("schedule warmup_cosine(warmup = 2, min_lr = 0.001)", "schedule constant()"),
]


class Weights(torch.nn.Module):
    def __init__(self, tensors):
        super().__init__()
        self.p = torch.nn.ParameterList(torch.nn.Parameter(t.clone()) for t in tensors)


class TestEmaVsTorch(unittest.TestCase):
    def run_tool(self, *cmd):
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, f"{' '.join(cmd)}:\n{r.stderr}")
        return r.stdout

    def test_ema_matches_averaged_model(self):
        tools = find_tools()
        if not tools.get("stringc") or not tools.get("stringrun"):
            self.skipTest("stringc or stringrun is not built")
        with open(os.path.join(INPUTS, "tiny_mlp.pe")) as f:
            source = f.read()
        for old, new in EDITS:
            self.assertEqual(source.count(old), 1, f"tiny_mlp.pe no longer has {old!r}")
            source = source.replace(old, new)
        with tempfile.TemporaryDirectory() as tmp:
            model, pkg, data = (os.path.join(tmp, n) for n in ("m.pe", "m.pkg", "data"))
            with open(model, "w") as f:
                f.write(source)
            subprocess.run([sys.executable, os.path.join(INPUTS, "make_tiny_idx.py"), data],
                           check=True)
            self.run_tool(tools["stringc"], model, "--target=cpu", "-o", pkg)
            weights, final = [], None
            for k in range(1, STEPS + 1):
                ckpt = os.path.join(tmp, f"step{k}.ckpt")
                self.run_tool(tools["stringrun"], "train", pkg, "--data", data, "--batch", "4",
                              "--steps", str(k), "--no-eval", "--checkpoint", ckpt)
                final, _ = read_safetensors(ckpt)
                weights.append({n: t for n, t in final.items() if "." not in n})
            names = sorted(weights[0])
            trainable = [n for n in names if "ema." + n in final]
            self.assertIn("w_head", trainable)
            self.assertNotIn("gain", trainable)  # frozen: no EMA of its own

            current = Weights([weights[0][n] for n in trainable])
            average = AveragedModel(current, avg_fn=lambda avg, w, n: DECAY * avg + (1 - DECAY) * w)
            for step in weights:
                with torch.no_grad():
                    for p, n in zip(current.p, trainable):
                        p.copy_(step[n])
                average.update_parameters(current)
            for p, n in zip(average.module.p, trainable):
                torch.testing.assert_close(final["ema." + n], p.detach(), rtol=1e-6, atol=1e-7,
                                           msg=lambda m: f"ema.{n}: {m}")
                # The EMA is not the last weights (the test would be vacuous).
                self.assertFalse(torch.equal(final["ema." + n], final[n]), n)

            # eval --ema evaluates exactly those weights.
            ema_file = os.path.join(tmp, "ema.safetensors")
            save_safetensors(ema_file, {n: final["ema." + n] if n in trainable else final[n]
                                        for n in names})
            loss = re.compile(r"loss (\S+), accuracy")
            got = loss.search(self.run_tool(tools["stringrun"], "eval", pkg, "--data", data,
                                            "--resume", ckpt, "--ema")).group(1)
            want = loss.search(self.run_tool(tools["stringrun"], "eval", pkg, "--data", data,
                                             "--params", ema_file)).group(1)
            raw = loss.search(self.run_tool(tools["stringrun"], "eval", pkg, "--data", data,
                                            "--resume", ckpt)).group(1)
            self.assertEqual(got, want)
            self.assertNotEqual(got, raw)


if __name__ == "__main__":
    unittest.main()
