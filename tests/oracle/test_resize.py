"""The runtime's resizes (runtime/include/stringrt/Resize.h) against torch.

`stringrun eval --resize N` resizes the test images as
F.interpolate(mode="bilinear", align_corners=False, antialias=False) does;
`--resize-positions` resizes a learned position table [1 + n*n, D] as DeiT and
timm's resample_abs_pos_embed do: the class row kept, the grid resized with
F.interpolate(mode="bicubic", align_corners=False) over a plane per feature
(without antialiasing, which changes nothing when a table grows). The tool
stringrt_resize_tool (runtime/tests/ResizeTool.cpp) runs the runtime's code.
"""
import os
import subprocess
import tempfile
import unittest

import torch
import torch.nn.functional as F

from safetensors_io import read_safetensors, save_safetensors

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def tool():
    dirs = [os.environ.get("STRINGC_BIN_DIR", ""), os.path.join(REPO, "build", "bin")]
    for d in dirs:
        path = os.path.join(d, "stringrt_resize_tool")
        if d and os.access(path, os.X_OK):
            return path
    return None


def timm_resize(table, tokens):
    """timm.layers.resample_abs_pos_embed with one prefix token, as DeiT."""
    cls, grid = table[:1], table[1:]
    side, new_side = int(round(grid.shape[0] ** 0.5)), int(round((tokens - 1) ** 0.5))
    planes = grid.reshape(1, side, side, -1).permute(0, 3, 1, 2)
    planes = F.interpolate(planes, size=(new_side, new_side), mode="bicubic",
                           align_corners=False)
    return torch.cat([cls, planes.permute(0, 2, 3, 1).reshape(new_side * new_side, -1)])


@unittest.skipIf(tool() is None, "stringrt_resize_tool is not built")
class TestResizeAgainstTorch(unittest.TestCase):
    def run_tool(self, image, table, rows, cols, tokens):
        with tempfile.TemporaryDirectory() as work:
            src, dst = os.path.join(work, "in.safetensors"), os.path.join(work, "out.safetensors")
            save_safetensors(src, {"image": image, "table": table})
            subprocess.run([tool(), src, dst, str(rows), str(cols), str(tokens)], check=True)
            return read_safetensors(dst)[0]

    def test_images_and_tables(self):
        g = torch.Generator().manual_seed(46)
        # Up and down, square and not, the evaluation sizes of the examples.
        cases = [((1, 28, 28), 40, 40), ((1, 28, 28), 36, 36), ((1, 28, 28), 44, 44),
                 ((3, 7, 5), 4, 9), ((2, 6, 6), 3, 2), ((1, 28, 28), 28, 28)]
        for (c, h, w), rows, cols in cases:
            with self.subTest(image=(c, h, w), size=(rows, cols)):
                image = torch.rand(c, h, w, generator=g)
                table = torch.randn(1 + 7 * 7, 16, generator=g)
                tokens = 1 + max(1, rows // 4) ** 2
                out = self.run_tool(image, table, rows, cols, tokens)
                want = F.interpolate(image[None], size=(rows, cols), mode="bilinear",
                                     align_corners=False, antialias=False)[0]
                torch.testing.assert_close(out["bilinear"], want, rtol=0, atol=2e-6)
                want = F.interpolate(image[None], size=(rows, cols), mode="bicubic",
                                     align_corners=False, antialias=False)[0]
                torch.testing.assert_close(out["bicubic"], want, rtol=0, atol=1e-5)
                torch.testing.assert_close(out["table"], timm_resize(table, tokens),
                                           rtol=0, atol=1e-5)


if __name__ == "__main__":
    unittest.main()
