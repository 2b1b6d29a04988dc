"""The gather ops of the gather rewrites in the oracle (pe_torch.skip_gather,
offset_table, pair_gather; pe_torch_grad.skip_gather_grad, pair_gather_grad):
forward against what they replace (skip-masked attention; generator_exp of
the relative positions), backward against torch.autograd, in float64. When
string-opt is built (STRINGC_BIN_DIR), also the interpreter on the rewritten
graphs: pe-skip-gather and pe-distinct-offsets leave the forward results and
the @gradients of a small module unchanged."""

import os
import subprocess
import sys
import unittest

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ir_interpreter as ir  # noqa: E402
import pe_torch as pt  # noqa: E402
import pe_torch_grad as pg  # noqa: E402

torch.set_num_threads(1)
D64 = torch.float64


def randn(*shape, seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=D64)


def vjp(fn, x, dy):
    x = x.detach().clone().requires_grad_()
    (g,) = torch.autograd.grad(fn(x), [x], dy)
    return g


def distinct_offsets(pos):
    """First-appearance distinct rows of relative_positions(pos), and the index."""
    r = pt.relative_positions(pos)
    T, _, A = r.shape
    rows, offsets, index = {}, [], []
    for row in r.reshape(T * T, A).tolist():
        key = tuple(int(v) for v in row)
        if key not in rows:
            rows[key] = len(rows)
            offsets.extend(key)
        index.append(rows[key])
    return offsets, index, len(rows)


class TestGatherOps(unittest.TestCase):
    def test_skip_gather_is_skip_attention(self):
        q, k, v = randn(2, 7, 6, seed=1), randn(2, 7, 6, seed=2), randn(2, 7, 6, seed=3)
        for base in (0, 1, 5):
            want = pt.attention(q, k, v, heads=3, scale=0.3, mask="skip", skip_base=base)
            got = pt.skip_gather(v, heads=3, skip_base=base)
            self.assertTrue(torch.equal(got, want), f"skip_base {base}")

    def test_skip_gather_grad(self):
        v, dy = randn(2, 6, 8, seed=4), randn(2, 6, 8, seed=5)
        for base in (0, 2, 7):
            want = vjp(lambda x: pt.skip_gather(x, 2, base), v, dy)
            self.assertTrue(torch.equal(pg.skip_gather_grad(dy, 2, base), want))

    def test_pair_gather_of_distinct_offsets(self):
        pos = pt.grid_positions(3, 3, special=1, dtype=D64)
        offsets, index, rows = distinct_offsets(pos)
        self.assertEqual(rows, 25)  # (2*3-1)^2; CLS at (0, 0) adds none
        L = pt.skew(randn(2, 6, seed=6) * 0.3, 4)
        table = pt.offset_table(offsets, rows, 2, dtype=D64)
        got = pt.pair_gather(pt.generator_exp(table, L), index, 10)
        want = pt.generator_exp(pt.relative_positions(pos), L)
        self.assertLess((got - want).abs().max().item(), 1e-14)

    def test_pair_gather_grad(self):
        table, index = randn(3, 2, 2, seed=7), [0, 2, 2, 1, 0, 0, 2, 2, 0]
        dy = randn(3, 3, 2, 2, seed=8)
        want = vjp(lambda x: pt.pair_gather(x, index, 3), table, dy)
        self.assertLess((pg.pair_gather_grad(dy, index, 3) - want).abs().max().item(), 1e-14)


SKIP_MODULE = """
module @m {
  pe.parameter @w : tensor<8x8xf32> {init = "normal", mean = 0.0 : f64, std = 0.5 : f64, seed = 1 : i64}
  pe.parameter @wq : tensor<8x8xf32> frozen {init = "normal", mean = 0.0 : f64, std = 0.5 : f64, seed = 2 : i64}
  pe.parameter @gen : tensor<2x6xf32> {init = "normal", mean = 0.0 : f64, std = 0.3 : f64, seed = 3 : i64}
  func.func @forward(%x: tensor<?x5x8xf32> {pe.input = "x"}) -> (tensor<f32> {pe.output = "loss"}) {
    %w = pe.get_param @w : tensor<8x8xf32>
    %wq = pe.get_param @wq : tensor<8x8xf32>
    %g = pe.get_param @gen : tensor<2x6xf32>
    %v = pe.linear %x, %w : tensor<?x5x8xf32>, tensor<8x8xf32> -> tensor<?x5x8xf32>
    %q = pe.linear %x, %wq : tensor<?x5x8xf32>, tensor<8x8xf32> -> tensor<?x5x8xf32>
    %a = pe.attention %q, %q, %v heads(2) scale(5.000000e-01) mask(skip) skip_base(1) : tensor<?x5x8xf32>, tensor<?x5x8xf32>, tensor<?x5x8xf32> -> tensor<?x5x8xf32>
    %pos = pe.grid_positions rows(2) cols(2) special(1) : tensor<5x2xf32>
    %r = pe.relative_positions %pos : tensor<5x2xf32> -> tensor<5x5x2xf32>
    %L = pe.skew %g dim(4) : tensor<2x6xf32> -> tensor<2x4x4xf32>
    %R = pe.generator_exp %r, %L : tensor<5x5x2xf32>, tensor<2x4x4xf32> -> tensor<5x5x4x4xf32>
    %b = pe.attention %a, %v, %v, %R heads(2) scale(5.000000e-01) mask(none) : tensor<?x5x8xf32>, tensor<?x5x8xf32>, tensor<?x5x8xf32>, tensor<5x5x4x4xf32> -> tensor<?x5x8xf32>
    %l = pe.mean %b : tensor<?x5x8xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
"""


@unittest.skipUnless(os.environ.get("STRINGC_BIN_DIR") and os.path.exists(
    os.path.join(os.environ.get("STRINGC_BIN_DIR", ""), "string-opt")), "string-opt not built")
class TestRewrittenGraphs(unittest.TestCase):
    def run_opt(self, passes):
        tool = os.path.join(os.environ["STRINGC_BIN_DIR"], "string-opt")
        out = subprocess.run([tool, *passes, "--pe-autodiff", "--mlir-print-op-generic", "-"],
                             input=SKIP_MODULE, capture_output=True, text=True, check=True)
        return ir.load_module(out.stdout)

    def test_rewrites_keep_loss_and_gradients(self):
        plain = self.run_opt([])
        rewritten = self.run_opt(["--pe-skip-gather", "--pe-distinct-offsets"])
        text = subprocess.run(
            [os.path.join(os.environ["STRINGC_BIN_DIR"], "string-opt"), "--pe-skip-gather",
             "--pe-distinct-offsets", "--pe-autodiff", "-"], input=SKIP_MODULE,
            capture_output=True, text=True, check=True).stdout
        for op in ("pe.skip_gather_grad", "pe.pair_gather_grad", "pe.offset_table"):
            self.assertIn(op, text)
        params = ir.init_params(plain, dtype=D64)
        inputs = {"x": randn(3, 5, 8, seed=9)}
        want = ir.evaluate(plain, params, inputs, dtype=D64, function="gradients")
        got = ir.evaluate(rewritten, params, inputs, dtype=D64, function="gradients")
        self.assertEqual(list(got), list(want))
        for name in want:
            diff = (got[name] - want[name]).abs().max().item()
            self.assertLess(diff, 1e-12, name)


if __name__ == "__main__":
    unittest.main()
