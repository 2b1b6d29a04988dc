"""stringrt.Model(device="cuda") against the CPU (docs/python.md, "GPU").

Run by CTest (tests/cuda/emulate/CMakeLists.txt, `python-module-cuda-emulated`)
under the CUDA emulator (docs/cuda.md, "Emulator") on the package
$STRINGRT_TEST_CUDA_PACKAGE (examples/vit_rope.pe compiled with
--target=cuda); on a GPU machine the same script runs on the device. The
tolerances are `stringrun gradients --device cuda`'s (tools/stringrun/DeviceRun.h).
"""

import os
import tempfile
import unittest

import numpy as np

import stringrt

LOSS_TOLERANCE = 1e-4      # relative, kLossTolerance
GRADIENT_TOLERANCE = 2e-3  # of the largest magnitude per parameter, kGradientTolerance


def close(test, gpu, cpu, what):
    largest = float(np.abs(cpu).max())
    diff = float(np.abs(gpu.astype(np.float64) - cpu).max())
    test.assertTrue(diff <= 1e-7 or diff <= GRADIENT_TOLERANCE * largest,
                    f"{what}: differs by {diff} (largest {largest})")


@unittest.skipUnless(stringrt.have_cuda, "the module was built without the CUDA backend")
class CudaModelTest(unittest.TestCase):
    def setUp(self):
        self.package = stringrt.Package.load(os.environ["STRINGRT_TEST_CUDA_PACKAGE"])
        rng = np.random.default_rng(4)
        self.image = rng.random((2, 1, 28, 28), dtype=np.float32)
        self.label = np.array([3, 7], dtype=np.int32)

    def models(self):
        cpu = stringrt.Model(self.package)
        gpu = stringrt.Model(self.package, device="cuda")
        cpu.init_parameters()
        gpu.init_parameters()
        return cpu, gpu

    def test_gradients_forward_and_steps_match_the_cpu(self):
        cpu, gpu = self.models()
        self.assertEqual(gpu.device, "cuda")
        for k, v in cpu.parameters.items():
            np.testing.assert_array_equal(gpu.parameters[k], v, err_msg=k)
        lc, gc = cpu.gradients(image=self.image, label=self.label)
        lg, gg = gpu.gradients(image=self.image, label=self.label)
        self.assertLessEqual(abs(lg - lc), LOSS_TOLERANCE * max(1.0, abs(lc)))
        self.assertEqual(sorted(gg), sorted(gc))
        for k in gc:
            close(self, gg[k], gc[k], "gradient of " + k)
        fc = cpu.forward(image=self.image, label=self.label)
        fg = gpu.forward(image=self.image, label=self.label)
        self.assertEqual(fg["logits"].shape, (2, 10))
        close(self, fg["logits"], fc["logits"], "logits")
        for _ in range(2):
            sc = cpu.train_step(total_steps=4, image=self.image, label=self.label)
            sg = gpu.train_step(total_steps=4, image=self.image, label=self.label)
            self.assertEqual(sg["step"], sc["step"])
            self.assertAlmostEqual(sg["lr"], sc["lr"])
            self.assertLessEqual(abs(sg["loss"] - sc["loss"]), LOSS_TOLERANCE * max(1.0, abs(sc["loss"])))
        self.assertEqual(gpu.step, 2)
        for k, v in cpu.parameters.items():
            close(self, gpu.parameters[k], v, "parameter " + k)

    def test_parameters_are_copies_and_checkpoints_round_trip(self):
        _, gpu = self.models()
        p = gpu.parameters
        p["b_head"][:] = 100.0  # a copy: the device keeps its own
        self.assertFalse((gpu.parameters["b_head"] == 100.0).any())
        gpu.set_parameters(b_head=np.full(10, 0.5, np.float32))
        np.testing.assert_array_equal(gpu.parameters["b_head"], np.full(10, 0.5, np.float32))
        gpu.train_step(total_steps=3, image=self.image, label=self.label)
        with tempfile.TemporaryDirectory() as d:
            ckpt = os.path.join(d, "gpu.ckpt")
            gpu.save_checkpoint(ckpt, total_steps=3)
            saved = gpu.parameters
            resumed = stringrt.Model(self.package, device="cuda")
            resumed.load_checkpoint(ckpt)
            self.assertEqual(resumed.step, 1)
            a = gpu.train_step(total_steps=3, image=self.image, label=self.label)
            b = resumed.train_step(total_steps=3, image=self.image, label=self.label)
            self.assertEqual(a, b)
            # The CPU reads the device's checkpoint: the parameters of its step.
            on_cpu = stringrt.Model(self.package)
            on_cpu.load_parameters(ckpt)
            for k, v in saved.items():
                np.testing.assert_array_equal(on_cpu.parameters[k], v, err_msg=k)


if __name__ == "__main__":
    unittest.main()
