"""The compiled runtime against PyTorch (docs/autodiff.md, "Verification").

For every examples/*.pe whose dataset is on this machine:
  1. `stringc EX --target=cpu -o EX.pkg` (the package the runtime runs), and
     `stringc EX --emit=mlir | string-opt --pe-autodiff --mlir-print-op-generic`
     (the same module, with @gradients, for the interpreter);
  2. `stringrun gradients EX.pkg --batch B --out EX.safetensors` runs the
     package's gradients program once on the first training batch (seed 0,
     or SEED's, which also keys the dropout masks)
     and writes the batch (input.*), the parameters (param.*), the loss and
     every gradient (grad.*). It runs twice: first from the runtime's own
     initialisation, to get the parameters; then with --params, from those
     parameters with N(0, 0.1^2) noise added to the ones initialised to a
     constant (zeros, ones: layer-norm gains and biases, ...), so that no
     factor of exactly 1 or 0 hides a wrong gradient term. The second file is
     the one compared;
     The second run is made once per kernel set (`--kernels reference`, the
     plain reference kernels, `--kernels fast`, the multi-threaded fast
     kernels where an op has one, and `--kernels compiled`, the package's
     compiler-generated kernels, docs/codegen.md, where stringrun has it),
     each file compared on its own;
  3. ir_interpreter.py evaluates @gradients on the same parameters and
     inputs, read back from that file, in float32 and in float64.

The runtime (float32 kernels of either set, executor, package) must agree
with the float64 oracle: |loss_rt - loss_64| <= 1e-5 |loss_64|, and for every
trainable parameter ||g_rt - g_64|| / max(||g_64||, floor) <= max(1e-4, 5 times
the float32 oracle's own error on that tensor) (Frobenius norms over the
whole tensor; floor = 1e-6 times the largest gradient norm of
the model, so that a gradient that is zero in exact arithmetic compares by
its absolute size). The float32 oracle's error against float64 is printed
next to it as the yardstick of float32 rounding.

The tools come from $STRINGC_BIN_DIR, else the build*/bin directories of the
repository; the test skips itself (saying which) when stringc, string-opt
with --pe-autodiff or stringrun with `gradients` is not built. A stringrun
without --kernels is checked once, on its only kernels.
"""

import glob
import os
import subprocess
import sys
import tempfile
import time
import unittest

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import ir_interpreter as ii  # noqa: E402
from example_sizes import check_defines  # noqa: E402
from safetensors_io import read_safetensors, save_safetensors  # noqa: E402

torch.set_num_threads(1)
EXAMPLES = os.path.join(REPO, "examples")
GRAD_REL_TOL = 1e-4     # per parameter tensor, norm-wise, against float64
F32_ERROR_FACTOR = 5    # or this many times the float32 oracle's own error, if larger
LOSS_REL_TOL = 1e-5
FLOOR = 1e-6            # times the model's largest gradient norm
NOISE = 0.1             # std of the noise on constant-initialised parameters
# vit_generators' matrix exponentials and their Frechet derivatives make its
# interpretation slow; one image keeps the test short.
BATCH = {"vit_generators.pe": 1}
# Variants written at test time from an example by one textual change, for
# the features no example uses: (variant, example, text, replacement).
VARIANTS = [
    ("gpt_rope_causal_label_smoothing.pe", "gpt_rope_causal.pe",
     "loss cross_entropy(logits, targets)", "loss cross_entropy(logits, targets, smoothing = 0.2)"),
    # The runtime's dropout masks (stringrun gradients: step key 0, 0, 0)
    # against the oracle's Philox (philox.py, pe_torch.dropout).
    ("vit_rope_dropout.pe", "vit_rope.pe", "return x + linear(gelu(linear(h, w1, b1)), w2, b2)",
     "return x + drop_path(linear(dropout(gelu(linear(h, w1, b1)), p = 0.3), w2, b2), p = 0.25)"),
]
DEFAULT_BATCH = 2
# `stringrun gradients --seed`: the data order and the dropout masks (step
# key (seed, 0, 0)); a seed past 2^32 puts both words of the key to use.
SEED = {"vit_rope_dropout.pe": (1 << 33) + 5}
KERNEL_SETS = ("reference", "fast", "compiled")  # stringrun --kernels


def _tool_dirs():
    dirs = [os.environ.get("STRINGC_BIN_DIR", "")]
    dirs += sorted(glob.glob(os.path.join(REPO, "build*", "bin")))
    return [d for d in dirs if d and os.path.isdir(d)]


def _help_has(tool, text):
    try:
        r = subprocess.run([tool, "--help"], capture_output=True, text=True, timeout=60)
    except OSError:
        return False
    return text in r.stdout


def find_tools():
    """{'stringc', 'string-opt', 'stringrun'}: the first directory that has
    all three (string-opt with --pe-autodiff, stringrun with `gradients`);
    else the missing ones are None."""
    wanted = {"stringc": None, "string-opt": "--pe-autodiff", "stringrun": "gradients"}
    best = {}
    for d in _tool_dirs():
        have = {}
        for tool, option in wanted.items():
            path = os.path.join(d, tool)
            if os.access(path, os.X_OK) and (option is None or _help_has(path, option)):
                have[tool] = path
        if len(have) == len(wanted):
            return have
        for tool, path in have.items():
            best.setdefault(tool, path)
    return {tool: best.get(tool) for tool in wanted}


def rel_error(got, want, floor=0.0):
    """||got - want|| / max(||want||, floor), in float64."""
    got, want = got.double(), want.double()
    return ((got - want).norm() / max(want.norm().item(), floor, 1e-300)).item()


def write_variants(directory):
    """Writes VARIANTS into `directory`; returns their paths. A variant whose
    text is missing from its example fails loudly (the example changed)."""
    paths = []
    for variant, example, text, replacement in VARIANTS:
        with open(os.path.join(EXAMPLES, example)) as f:
            source = f.read()
        if source.count(text) != 1:
            raise AssertionError(f"{example} no longer has {text!r} once: update VARIANTS")
        path = os.path.join(directory, variant)
        with open(path, "w") as f:
            f.write(source.replace(text, replacement))
        paths.append(path)
    return paths


def perturbed(module, dump, seed=0):
    """{name: tensor} of the parameters (param.NAME) of a gradients dump, with
    N(0, NOISE^2) added to those initialised to a constant."""
    g = torch.Generator().manual_seed(seed)
    out = {}
    for name, p in module.parameters.items():
        t = dump["param." + name]
        if p.init in ("zeros", "ones", "constant"):
            t = t + NOISE * torch.randn(t.shape, generator=g, dtype=torch.float32)
        out[name] = t
    return out


class TestRuntimeVsTorch(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tools = find_tools()
        cls.examples = sorted(glob.glob(os.path.join(EXAMPLES, "*.pe")))
        cls.table = []
        runner = cls.tools.get("stringrun")
        cls.kernel_sets = KERNEL_SETS if runner and _help_has(runner, "--kernels") else (None,)
        if runner and not _help_has(runner, "compiled"):  # a stringrun without generated kernels
            cls.kernel_sets = tuple(k for k in cls.kernel_sets if k != "compiled")

    @classmethod
    def tearDownClass(cls):
        if not cls.table:
            return
        print("\nruntime (float32) vs the PyTorch oracle (float64); relative errors:")
        print(f"  {'example':<24} {'kernels':<9} {'B':>2} {'loss':>9} {'max grad':>9}"
              f" {'worst parameter':<28} {'torch f32':>9} {'seconds':>7}")
        for row in cls.table:
            print("  {:<24} {:<9} {:>2} {:>9.2e} {:>9.2e} {:<28} {:>9.2e} {:>7.1f}".format(*row))
        sys.stdout.flush()

    def run_tool(self, cmd, stdin=None):
        r = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, f"{' '.join(cmd)}:\n{r.stderr}")
        return r.stdout

    def test_examples(self):
        missing = [t for t, p in self.tools.items() if not p]
        if missing:
            self.skipTest(f"not built: {', '.join(missing)} (with --pe-autodiff for "
                          f"string-opt, the 'gradients' command for stringrun)")
        self.assertTrue(self.examples)
        checked = 0
        with tempfile.TemporaryDirectory() as variants:
            for example in self.examples + write_variants(variants):
                name = os.path.basename(example)
                with self.subTest(example=name):
                    checked += self.check_example(example, BATCH.get(name, DEFAULT_BATCH))
        self.assertGreater(checked, 0, "no example's dataset is on this machine")

    def check_example(self, example, batch):
        """Compares one example; returns 0 (data missing: a skipped subtest) or 1."""
        name = os.path.basename(example)
        start = time.monotonic()
        mlir = self.run_tool([self.tools["stringc"], example, "--emit=mlir"]
                             + check_defines(example))
        module = ii.load_module(self.run_tool(
            [self.tools["string-opt"], "--pe-autodiff", "--mlir-print-op-generic", "-"], mlir))
        data = (module.dataset or {}).get("path")
        if not data or not os.path.exists(data):
            self.skipTest(f"{name}: its dataset {data or '(none declared)'} is not on this machine")
            return 0

        dumps = {}  # kernel set -> the tensors of its gradients file
        with tempfile.TemporaryDirectory() as tmp:
            pkg = os.path.join(tmp, "model.pkg")
            first = os.path.join(tmp, "initial.safetensors")
            weights = os.path.join(tmp, "params.safetensors")
            self.run_tool([self.tools["stringc"], example, "--target=cpu", "-o", pkg]
                          + check_defines(example))
            seed = SEED.get(name, 0)
            gradients = [self.tools["stringrun"], "gradients", pkg, "--batch", str(batch),
                         "--seed", str(seed)]
            self.run_tool(gradients + ["--out", first])
            initial, _ = read_safetensors(first)
            save_safetensors(weights, perturbed(module, initial))
            for kernels in self.kernel_sets:
                dump = os.path.join(tmp, f"gradients-{kernels}.safetensors")
                flag = ["--kernels", kernels] if kernels else []
                self.run_tool(gradients + flag + ["--params", weights, "--out", dump])
                tensors, meta = read_safetensors(dump)
                self.assertEqual(meta.get("format"), "stringrun-gradients", name)
                dumps[kernels] = tensors
        for kernels, tensors in dumps.items():
            for n, t in initial.items():     # the same batch; the weights given
                if not n.startswith(("param.", "grad.", "loss")):
                    self.assertTrue(torch.equal(t, tensors[n]), f"{name} ({kernels}): {n}")
            for n, t in perturbed(module, initial).items():
                self.assertTrue(torch.equal(t, tensors["param." + n]),
                                f"{name} ({kernels}): param {n}")
        tensors = next(iter(dumps.values()))

        inputs = {n[len("input."):]: t for n, t in tensors.items() if n.startswith("input.")}
        params = {n[len("param."):]: t for n, t in tensors.items() if n.startswith("param.")}
        grads = {n[len("grad."):]: t for n, t in tensors.items() if n.startswith("grad.")}
        trainable = [n for n, _ in module.gradients()]
        self.assertEqual(sorted(inputs), sorted(n for n, _ in module.inputs("gradients")), name)
        self.assertEqual(sorted(params), sorted(module.parameters), name)
        self.assertEqual(sorted(grads), sorted(trainable), name)
        self.assertEqual(tuple(tensors["loss"].shape), (), name)
        for n, t in inputs.items():
            self.assertEqual(tuple(t.shape)[0], batch, f"{name}: input {n}")

        with torch.no_grad():
            key = (SEED.get(name, 0), 0, 0)
            want = ii.evaluate(module, params, inputs, dtype=torch.float64, function="gradients",
                               step_key=key)
            f32 = ii.evaluate(module, params, inputs, dtype=torch.float32, function="gradients",
                              step_key=key)

        floor = FLOOR * max(want[n].double().norm().item() for n in trainable)
        for kernels, tensors in dumps.items():
            label = f"{name} ({kernels or 'default'} kernels)"
            grads = {n[len("grad."):]: t for n, t in tensors.items() if n.startswith("grad.")}
            self.assertEqual(sorted(grads), sorted(trainable), label)
            loss_err = abs(tensors["loss"].double().item() - want["loss"].item()) / max(
                abs(want["loss"].item()), 1e-300)
            self.assertLessEqual(
                loss_err, LOSS_REL_TOL,
                f"{label}: loss {tensors['loss'].item()} vs {want['loss'].item()}")
            worst, worst_name, worst_f32 = 0.0, "", 0.0
            for n in trainable:
                with self.subTest(example=name, kernels=kernels, param=n):
                    g = grads[n]
                    self.assertEqual(tuple(g.shape), tuple(want[n].shape))
                    self.assertTrue(torch.isfinite(g).all(), f"{label}: grad {n} not finite")
                    err = rel_error(g, want[n], floor)
                    f32_err = rel_error(f32[n], want[n], floor)
                    worst_f32 = max(worst_f32, f32_err)
                    # A deep, wide model (vit_s_rope: 12 layers, sums over 384
                    # and 197) rounds more in float32 whatever the kernels:
                    # the bound grows with the float32 oracle's own error.
                    tol = max(GRAD_REL_TOL, F32_ERROR_FACTOR * f32_err)
                    if err >= worst:
                        worst, worst_name = err, n
                    self.assertLessEqual(
                        err, tol,
                        f"{label}: grad {n}: relative error {err:.3e} > {tol:.1e} (||g64|| "
                        f"{want[n].norm().item():.3e}, float32 oracle "
                        f"{rel_error(f32[n], want[n], floor):.3e})")
            self.table.append((name, kernels or "default", batch, loss_err, worst, worst_name,
                               worst_f32, time.monotonic() - start))
        return 1


if __name__ == "__main__":
    unittest.main()
