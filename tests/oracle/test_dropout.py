"""The oracle's dropout (pe_torch.dropout, philox.py) on its own: Philox
against Random123's known answers, the mask's statistics and coordinates,
and the VJP against finite differences (torch.autograd.gradcheck) with the
masks fixed by the step key. The runtime's kernel is checked against this
oracle in test_runtime_vs_torch.py (vit_rope_dropout.pe)."""

import os
import sys
import unittest

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import pe_torch as pt  # noqa: E402
import philox  # noqa: E402

D64 = torch.float64


class TestPhilox(unittest.TestCase):
    def test_known_answers(self):
        # Random123 kat_vectors, philox4x32_10.
        cases = [
            ((0, 0, 0, 0), (0, 0), (0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8)),
            ((0xffffffff,) * 4, (0xffffffff,) * 2, (0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd)),
            ((0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344), (0xa4093822, 0x299f31d0),
             (0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1)),
        ]
        for counter, key, want in cases:
            self.assertEqual(tuple(int(w) for w in philox.block(counter, key)), want)

    def test_uniform_is_the_top_24_bits(self):
        self.assertEqual(philox.uniform(0), 0.0)
        self.assertEqual(philox.uniform(0xffffffff), 1.0 - 2.0 ** -24)
        self.assertEqual(philox.uniform(0x80000000), 0.5)


class TestDropout(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(0)

    def test_keeps_with_probability_one_minus_p_and_rescales(self):
        x = torch.rand(64, 10, 25, dtype=D64) + 1
        for p in (0.1, 0.5, 0.9):
            y = pt.dropout(x, p, 0, key=(3, 17, 0))
            kept = y != 0
            self.assertTrue(torch.equal(y[kept], x[kept] * (1 / (1 - p))))
            n, q = x.numel(), 1 - p
            self.assertLess(abs(kept.double().mean().item() - q), 5 * (p * q / n) ** 0.5)

    def test_drop_path_is_dropouts_draw_for_element_zero(self):
        x = torch.rand(300, 3, 4, dtype=D64) + 1
        y = pt.dropout(x, 0.3, 5, per_sample=True, key=(9, 2, 0))
        per_sample = (y != 0).reshape(300, -1)
        self.assertTrue(torch.equal(per_sample.all(1), per_sample.any(1)))
        first = pt.dropout_keep((300, 1), 0.3, 5, key=(9, 2, 0))[:, 0]
        self.assertTrue(torch.equal(per_sample[:, 0], first))

    def test_mask_coordinates(self):
        key = ((1 << 40) + 7, 11, 0)
        keep = pt.dropout_keep((6, 40), 0.5, 2, key=key)
        self.assertFalse(torch.equal(keep, pt.dropout_keep((6, 40), 0.5, 2, key=(7, 11, 0))))
        self.assertFalse(torch.equal(keep, pt.dropout_keep((6, 40), 0.5, 2, key=(key[0], 12, 0))))
        self.assertFalse(torch.equal(keep, pt.dropout_keep((6, 40), 0.5, 3, key=key)))
        rows = pt.dropout_keep((3, 40), 0.5, 2, key=(key[0], 11, 2))
        self.assertTrue(torch.equal(rows, keep[2:5]))

    def test_vjp_against_finite_differences(self):
        for per_sample in (False, True):
            x = torch.randn(5, 3, 4, dtype=D64, requires_grad=True)
            self.assertTrue(torch.autograd.gradcheck(
                lambda t: pt.dropout(t, 0.4, 1, per_sample, key=(1, 4, 3)), (x,)))
            # The VJP is the same dropout of dy.
            dy = torch.randn(5, 3, 4, dtype=D64)
            (dx,) = torch.autograd.grad(pt.dropout(x, 0.4, 1, per_sample, key=(1, 4, 3)), x, dy)
            self.assertTrue(torch.equal(dx, pt.dropout(dy, 0.4, 1, per_sample, key=(1, 4, 3))))


if __name__ == "__main__":
    unittest.main()
