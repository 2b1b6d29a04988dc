"""The Python module `stringrt` (runtime/python, docs/python.md) on real packages.

Run by CTest (tests/CMakeLists.txt, `python-module`) with /usr/bin/python3:
PYTHONPATH holds the built module (<build>/python) and tests/oracle (the
safetensors reader); STRINGC_BIN_DIR the built stringc and stringrun. The
packages are compiled here from tests/lit/stringc/Inputs/tiny_mlp.pe and
examples/vit_rope.pe.
"""

import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import numpy as np

import stringrt
from safetensors_io import read_safetensors

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ["STRINGC_BIN_DIR"]
TINY_PE = os.path.join(ROOT, "tests", "lit", "stringc", "Inputs", "tiny_mlp.pe")
VIT_PE = os.path.join(ROOT, "examples", "vit_rope.pe")


def tool(name):
    return os.path.join(BIN, name)


def tiny_batch(batch=6):
    """tiny_mlp's kind of batch: an image of class k is bright in row k."""
    label = np.arange(batch, dtype=np.int32) % 3
    image = np.full((batch, 1, 4, 4), 0.05, dtype=np.float32)
    for b in range(batch):
        image[b, 0, label[b], :] = 0.9
        image[b, 0, :, b % 4] += 0.1
    return image, label


class PackageTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        cls.tiny = os.path.join(cls.dir.name, "tiny.pkg")
        subprocess.run([tool("stringc"), TINY_PE, "--target=cpu", "-o", cls.tiny], check=True)
        cls.data = os.path.join(cls.dir.name, "data")
        subprocess.run([sys.executable, os.path.join(ROOT, "tests", "lit", "stringc", "Inputs",
                                                     "make_tiny_idx.py"), cls.data], check=True)

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def model(self, **kw):
        m = stringrt.Model(stringrt.Package.load(self.tiny), **kw)
        m.init_parameters()
        return m

    def test_package(self):
        p = stringrt.Package.load(self.tiny)
        self.assertEqual(p.model_name, "tiny_mlp")
        self.assertEqual(p.target, "cpu")
        self.assertEqual(p.inputs, {"image": ("float32", (-1, 1, 4, 4)), "label": ("int32", (-1,))})
        self.assertIn("tiny_mlp", repr(p))

    def test_errors_carry_the_runtime_message(self):
        with self.assertRaisesRegex(stringrt.Error, r"missing\.pkg"):
            stringrt.Package.load(os.path.join(self.dir.name, "missing.pkg"))
        self.assertTrue(issubclass(stringrt.Error, RuntimeError))
        m = self.model()
        image, label = tiny_batch()
        with self.assertRaisesRegex(stringrt.Error, r"missing input 'label'"):
            m.forward(image=image)
        with self.assertRaisesRegex(stringrt.Error, r"unknown input 'pixels'"):
            m.forward(pixels=image, label=label)
        with self.assertRaisesRegex(stringrt.Error, r"input 'image' must have shape \[-1, 1, 4, 4\]"):
            m.forward(image=image[:, :, :3], label=label)
        with self.assertRaisesRegex(stringrt.Error, r"must hold integers"):
            m.forward(image=image, label=label.astype(np.float32))
        with self.assertRaisesRegex(stringrt.Error, r"inputs disagree on the batch size"):
            m.forward(image=image, label=label[:4])
        with self.assertRaisesRegex(stringrt.Error, r"unknown kernels 'fastest'"):
            stringrt.Model(stringrt.Package.load(self.tiny), kernels="fastest")
        with self.assertRaisesRegex(stringrt.Error, r"unknown device 'tpu'"):
            stringrt.Model(stringrt.Package.load(self.tiny), device="tpu")
        if stringrt.have_cuda:
            with self.assertRaisesRegex(stringrt.Error, r"--target=cuda"):
                stringrt.Model(stringrt.Package.load(self.tiny), device="cuda")
        # A non-finite loss takes no step and leaves the parameters alone.
        before = {k: v.copy() for k, v in m.parameters.items()}
        bad = image.copy()
        bad[0, 0, 0, 0] = np.nan
        with self.assertRaisesRegex(stringrt.Error, r"step 1: the loss is nan; the step is not taken"):
            m.train_step(total_steps=3, image=bad, label=label)
        self.assertEqual(m.step, 0)
        for k, v in m.parameters.items():
            np.testing.assert_array_equal(v, before[k])

    def test_gradients_equal_stringrun(self):
        """The same batch and parameters give stringrun's loss and gradients, bit for bit."""
        out = os.path.join(self.dir.name, "grads.safetensors")
        subprocess.run([tool("stringrun"), "gradients", self.tiny, "--data", self.data, "--batch", "5",
                        "--seed", "3", "--out", out], check=True, stdout=subprocess.DEVNULL)
        t, _ = read_safetensors(out)
        m = self.model()
        m.set_parameters(**{k[6:]: v.numpy() for k, v in t.items() if k.startswith("param.")})
        loss, grads = m.gradients(image=t["input.image"].numpy(), label=t["input.label"].numpy())
        self.assertEqual(loss, float(t["loss"]))
        self.assertEqual(sorted(grads), sorted(k[5:] for k in t if k.startswith("grad.")))
        self.assertNotIn("gain", grads)  # frozen
        for name, g in grads.items():
            np.testing.assert_array_equal(g, t["grad." + name].numpy(), err_msg=name)

    def test_parameters_are_live_views(self):
        m = self.model()
        p = m.parameters
        self.assertEqual(p["w_patch"].shape, (16, 8))
        self.assertEqual(p["w_patch"].dtype, np.float32)
        np.testing.assert_array_equal(p["gain"], np.ones(8, np.float32))
        image, label = tiny_batch()
        logits = m.forward(image=image, label=label)["logits"]
        self.assertEqual(logits.shape, (6, 3))
        # A write through the view changes the model.
        p["b_head"][:] = [5.0, 0.0, 0.0]
        shifted = m.forward(image=image, label=label)["logits"]
        np.testing.assert_allclose(shifted - logits, np.tile([5.0, 0, 0], (6, 1)), atol=1e-5)
        # A step changes the arrays the caller holds.
        w = p["w_head"].copy()
        m.train_step(total_steps=3, image=image, label=label)
        self.assertFalse(np.array_equal(w, p["w_head"]))
        del m  # the views keep the model alive
        self.assertTrue(np.isfinite(p["w_head"]).all())

    def test_train_step_is_the_packages_adamw(self):
        """Step 1 of AdamW (tiny_mlp: lr 0.05, warm-up 2, weight decay 0.01, clip 1.0):
        w -= lr_1 (m / (1 - b1) / (sqrt(v / (1 - b2)) + eps) + wd w) with m, v of the
        clipped gradient g c: the update is lr_1 (g c / (|g c| + eps) + wd w)."""
        m = self.model()
        image, label = tiny_batch()
        before = {k: v.copy() for k, v in m.parameters.items()}
        loss, grads = m.gradients(image=image, label=label)
        info = m.train_step(total_steps=10, image=image, label=label)
        self.assertEqual(info["step"], 1)
        self.assertEqual(m.step, 1)
        self.assertEqual(info["loss"], loss)
        self.assertAlmostEqual(info["lr"], 0.05 / 2)
        norm = np.sqrt(sum(float((g.astype(np.float64) ** 2).sum()) for g in grads.values()))
        self.assertAlmostEqual(info["grad_norm"], norm, places=5)
        clip = min(1.0, 1.0 / norm)
        self.assertAlmostEqual(info["clip_scale"], clip, places=6)
        after = m.parameters
        np.testing.assert_array_equal(after["gain"], before["gain"])  # frozen
        for name, g in grads.items():
            gc = g.astype(np.float64) * clip
            w = before[name].astype(np.float64)
            expected = w - info["lr"] * (gc / (np.abs(gc) + 1e-8) + 0.01 * w)
            np.testing.assert_allclose(after[name], expected, rtol=1e-5, atol=1e-6, err_msg=name)
        # Training goes on and the loss falls.
        losses = [m.train_step(total_steps=10, image=image, label=label)["loss"] for _ in range(6)]
        self.assertLess(losses[-1], losses[0])

    def test_checkpoints(self):
        m = self.model()
        image, label = tiny_batch()
        for _ in range(3):
            m.train_step(total_steps=8, image=image, label=label)
        ckpt = os.path.join(self.dir.name, "tiny.ckpt")
        m.save_checkpoint(ckpt, total_steps=8)
        # stringrun reads it.
        info = subprocess.run([tool("stringrun"), "eval", self.tiny, "--params", ckpt, "--data",
                               self.data], capture_output=True, text=True)
        self.assertEqual(info.returncode, 0, info.stderr)
        self.assertIn("tiny.ckpt", info.stdout)
        # load_parameters: the same parameters in a fresh model.
        fresh = stringrt.Model(stringrt.Package.load(self.tiny))
        fresh.load_parameters(ckpt)
        for k, v in m.parameters.items():
            np.testing.assert_array_equal(fresh.parameters[k], v)
        self.assertEqual(fresh.step, 0)
        # load_checkpoint resumes: step count and optimizer state, so the next
        # step is the original's, bit for bit.
        resumed = stringrt.Model(stringrt.Package.load(self.tiny))
        resumed.load_checkpoint(ckpt)
        self.assertEqual(resumed.step, 3)
        a = m.train_step(total_steps=8, image=image, label=label)
        b = resumed.train_step(total_steps=8, image=image, label=label)
        self.assertEqual(a, b)
        for k, v in m.parameters.items():
            np.testing.assert_array_equal(resumed.parameters[k], v)
        with self.assertRaisesRegex(stringrt.Error, r"nothing\.ckpt"):
            fresh.load_parameters(os.path.join(self.dir.name, "nothing.ckpt"))

    def test_kernel_sets_agree(self):
        image, label = tiny_batch()
        ref = self.model(kernels="reference")
        fast = self.model(kernels="fast")
        self.assertEqual((ref.kernels, fast.kernels), ("reference", "fast"))
        lr, gr = ref.gradients(image=image, label=label)
        lf, gf = fast.gradients(image=image, label=label)
        self.assertAlmostEqual(lr, lf, places=5)
        for k in gr:
            np.testing.assert_allclose(gr[k], gf[k], rtol=1e-4, atol=1e-6)


class VitTest(unittest.TestCase):
    """vit_rope: the GIL is released while a program runs, and docs/python.md's example runs."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        cls.pkg = os.path.join(cls.dir.name, "vit_rope.pkg")
        subprocess.run([tool("stringc"), VIT_PE, "--target=cpu", "-o", cls.pkg], check=True)

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def test_gil_released_during_compute(self):
        m = stringrt.Model(stringrt.Package.load(self.pkg))
        m.init_parameters()
        rng = np.random.default_rng(0)
        image = rng.random((32, 1, 28, 28), dtype=np.float32)
        label = rng.integers(0, 10, 32, dtype=np.int32)
        # The worker notes when its call starts and ends; the main thread runs
        # Python code as soon as it can. With the GIL held through the call,
        # that is never strictly inside it.
        for attempt in range(5):
            times = {}
            started = threading.Event()

            def work():
                started.set()
                times["enter"] = time.perf_counter()
                m.gradients(image=image, label=label)
                times["exit"] = time.perf_counter()

            worker = threading.Thread(target=work)
            worker.start()
            started.wait()
            while "enter" not in times:
                pass
            time.sleep(0.001)
            main = time.perf_counter()
            worker.join()
            if times["enter"] < main < times["exit"]:
                return
        self.fail("the main thread never ran while gradients() was computing")

    def test_docs_example(self):
        with open(os.path.join(ROOT, "docs", "python.md")) as f:
            doc = f.read()
        code = re.search(r"```python\n(.*?)```", doc, re.S).group(1)
        self.assertLessEqual(len(code.strip().splitlines()), 12)
        result = subprocess.run([sys.executable, "-c", code], cwd=self.dir.name,
                                capture_output=True, text=True)
        self.assertEqual(result.returncode, 0, result.stderr)
        losses = [float(x) for x in re.findall(r"loss ([0-9.]+)", result.stdout)]
        self.assertEqual(len(losses), 5, result.stdout)
        self.assertTrue(all(np.isfinite(losses)))
        self.assertTrue(os.path.exists(os.path.join(self.dir.name, "vit_rope.ckpt")))


if __name__ == "__main__":
    unittest.main()
