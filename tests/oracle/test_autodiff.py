"""End-to-end checks of reverse-mode autodiff (docs/autodiff.md).

TestBackwardOpsInterpreted: the interpreter evaluates every backward op of
GradInputs/backward_ops.mlir like pe_torch_grad called directly, and a
hand-written @gradients like autograd of its @forward.

TestAutodiffPass: for every examples/*.pe (and GradInputs/batch_mean.pe, with
means over the batch, at several batch sizes, and GradInputs/dropout.pe at
several step keys), `stringc --emit=mlir |
string-opt --pe-autodiff` adds @gradients; interpreted in float64 it must give
the loss of @forward and, for every trainable parameter (and no frozen one),
the gradient that torch.autograd computes through the interpreted @forward
(relative tolerance 1e-8). The tools come from $STRINGC_BIN_DIR, else the
build*/bin directories of the repository; the class skips itself while they
or the pass are not built yet, or while the pass still meets ops without a
vector-Jacobian product.
"""

import glob
import os
import subprocess
import sys
import tempfile
import unittest

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import ir_interpreter as ii  # noqa: E402
from example_sizes import check_defines  # noqa: E402
import mlir_generic as mg  # noqa: E402
import pe_torch as pt  # noqa: E402
import pe_torch_grad as pg  # noqa: E402
from safetensors_io import read_safetensors, save_safetensors  # noqa: E402
from test_ir_interpreter import random_inputs  # noqa: E402

torch.set_num_threads(1)
D64 = torch.float64
BACKWARD_OPS = os.path.join(HERE, "GradInputs", "backward_ops.mlir")
BATCH_MEAN = os.path.join(HERE, "GradInputs", "batch_mean.pe")
DROPOUT = os.path.join(HERE, "GradInputs", "dropout.pe")
EXAMPLES = os.path.join(REPO, "examples")
REL_TOL = 1e-8


class Case(unittest.TestCase):
    def close(self, got, want, rel=1e-12, floor=0.0, what=""):
        """max |got - want| <= rel * max(max |want|, floor)."""
        self.assertEqual(tuple(got.shape), tuple(want.shape), what)
        if not want.numel():
            return
        err = (got - want).abs().max().item()
        size = max(want.abs().max().item(), floor)
        self.assertLessEqual(err, rel * size, f"{what}: max abs error {err}, max |want| {size}")


# ------------------------------------------------ interpreter, no tools --

def backward_ops_inputs(module, batch=2, seed=0):
    """Random float64 values for @backward_ops; ids in [0, 7), labels in [0, 5)."""
    g = torch.Generator().manual_seed(seed)
    out = {}
    for name, ty in module.inputs("backward_ops"):
        shape = tuple(batch if d is None else d for d in ty.shape)
        if ty.element == "i32":
            bound = 7 if name == "ids" else 5
            out[name] = torch.randint(0, bound, shape, generator=g).to(torch.int32)
        else:
            out[name] = torch.randn(shape, generator=g, dtype=D64)
    out["ds"] = pt.skew(torch.randn(6, generator=g, dtype=D64), 4)     # a Cayley generator
    return out


def backward_ops_direct(i):
    """What each result of @backward_ops must be, from pe_torch_grad."""
    x, dy, one = i["x"], i["dy"], torch.tensor(1.0, dtype=D64)
    lin_dx = pg.linear_grad_input(i["dy5"], i["w"])
    ln = pg.layer_norm_grad(x, i["g"], dy, eps=1e-3)
    pe = pg.patch_embed_grad(i["image"], i["dyp"], 2)
    ct = pg.class_token_grad(dy)
    # attention_grad reads the forward's y and lse (pe.attention's two results).
    y, lse = pt.attention(x, dy, lin_dx, 2, 0.5, "causal", return_lse=True)
    att = pg.attention_grad(x, dy, lin_dx, y, lse, dy, 2, 0.5, "causal")
    y, lse = pt.attention(x, lin_dx, dy, 2, 0.75, "none", rel=i["rel"], return_lse=True)
    rel = pg.attention_grad(x, lin_dx, dy, y, lse, dy, 2, 0.75, "none", rel=i["rel"])
    y, lse = pt.attention(dy, x, x, 2, 1.0, "skip", 1, return_lse=True)
    skip = pg.attention_grad(dy, x, x, y, lse, dy, 2, 1.0, "skip", 1)
    hh = pg.householder_grad_freqs(x, i["pos"], i["f1"], i["f2"], dy)
    cay = pg.cayley_grad(x, i["ds"], dy)
    rot = pg.apply_rotation_grad(x, i["rot"], dy, 2)
    spd = pg.spd_gate_grad(x, i["gamma"], dy)
    return {
        "sum_to": pg.sum_to(dy, (3, 4)), "sum_all": pg.sum_to(dy, ()),
        "broadcast": pg.broadcast_to(i["g"], (3, 4)),
        "broadcast_like": pg.broadcast_to(i["s"], x.shape),
        "expand": pg.expand_axis(dy, 2, 2),
        "mean_batch": pg.mean_grad(x, i["gamma"], 0), "mean_axis": pg.mean_grad(x, i["dyb"], 1),
        "mean_all": pg.mean_grad(x, i["s"]),
        "lin_dx": lin_dx, "lin_dw": pg.linear_grad_weight(x, i["dy5"]),
        "ln_dx": ln[0], "ln_dg": ln[1], "ln_db": ln[2],
        "gelu": pg.gelu_grad(x, dy, True), "gelu_erf": pg.gelu_grad(x, dy, False),
        "relu": pg.relu_grad(x, dy), "pe_dw": pe[0], "pe_db": pe[1],
        "te": pg.token_embed_grad(i["ids"], dy, 7), "ct_dx": ct[0], "ct_dcls": ct[1],
        "sel": pg.select_token_grad(i["dyb"], 1, 3),
        "att_dq": att[0], "att_dk": att[1], "att_dv": att[2],
        "rel_dq": rel[0], "rel_dk": rel[1], "rel_dv": rel[2], "rel_drel": rel[3],
        "skip_dq": skip[0], "skip_dk": skip[1], "skip_dv": skip[2],
        "ce": pg.cross_entropy_grad(i["dy5"], i["labels"], i["s"]),
        "rope": pg.rope_grad_freqs(x, i["pos"], i["f1"], dy),
        "hh_df1": hh[0], "hh_df2": hh[1],
        "skew": pg.skew_grad(i["ds2"], 4), "sparse": pg.sparse_skew_grad(i["ds"], 4, [0, 2, 5]),
        "cay_dx": cay[0], "cay_ds": cay[1],
        "gexp": pg.generator_exp_grad(i["r"], i["gens"], i["drot"]),
        "rot_dx": rot[0], "rot_dr": rot[1],
        "comm": pg.commutator_norm_grad(i["gens"], one),
        "spd_dx": spd[0], "spd_dg": spd[1],
        "skipg": pg.skip_gather_grad(dy, 2, 1),
        "pairg": pg.pair_gather_grad(i["drot"], [0, 1, 3, 2, 0, 1, 3, 3, 0], 4),
    }


class TestBackwardOpsInterpreted(Case):
    @classmethod
    def setUpClass(cls):
        with open(BACKWARD_OPS) as f:
            cls.text = f.read()
        cls.module = ii.load_module(cls.text)

    def test_every_backward_op(self):
        inputs = backward_ops_inputs(self.module)
        out = ii.evaluate(self.module, {}, inputs, dtype=D64, function="backward_ops")
        want = backward_ops_direct(inputs)
        self.assertEqual(list(out), list(want))
        for name, t in out.items():
            with self.subTest(result=name):
                self.close(t, want[name], what=name)
                if name in ("skip_dq", "skip_dk"):     # one key per row: exact zeros
                    self.assertTrue(torch.equal(t, torch.zeros_like(t)), name)
                else:
                    self.assertGreater(t.abs().max().item(), 0.0, name)
        ops = {op.name for op in mg.walk(self.module.ops)}
        for name in pg.__all__:
            self.assertIn(f"pe.{name}", ops)

    def test_hand_written_gradients(self):
        params = ii.init_params(self.module, dtype=D64)
        g = torch.Generator().manual_seed(3)
        params = {n: t + 0.3 * torch.randn(t.shape, generator=g, dtype=D64)
                  for n, t in params.items()}
        inputs = random_inputs(self.module, batch=3, seed=4)
        self.assertEqual([n for n, _ in self.module.gradients()],
                         ["ln_g", "ln_b", "w_out", "b_out"])
        out = ii.evaluate(self.module, params, inputs, dtype=D64, function="gradients")
        self.assertEqual(list(out), ["loss", "ln_g", "ln_b", "w_out", "b_out"])
        ref, grads = ii.loss_and_grads(self.module, params, inputs, dtype=D64)
        self.assertEqual(sorted(grads), ["b_out", "ln_b", "ln_g", "w_out"])
        self.close(out["loss"], ref["loss"].detach(), what="loss")
        for name, grad in grads.items():
            self.close(out[name], grad, what=name)

    def test_command_line_function(self):
        params = ii.init_params(self.module)
        inputs = random_inputs(self.module, batch=2, seed=5)
        with tempfile.TemporaryDirectory() as tmp:
            p, i, o = (os.path.join(tmp, n + ".safetensors") for n in "pio")
            save_safetensors(p, params)
            save_safetensors(i, {n: t.float() if t.is_floating_point() else t
                                 for n, t in inputs.items()})
            rc = ii.main([BACKWARD_OPS, "--params", p, "--inputs", i, "--out", o,
                          "--function", "gradients"])
            self.assertEqual(rc, 0)
            out, _ = read_safetensors(o)
        self.assertEqual(sorted(out), ["b_out", "ln_b", "ln_g", "loss", "w_out"])
        self.assertEqual(out["w_out"].dtype, torch.float32)

    def edit_backward_ops(self, old, new):
        """The module text with `old` replaced by `new` once in @backward_ops."""
        head, sep, body = self.text.partition('sym_name = "backward_ops"')
        self.assertIn(old, body)
        return head + sep + body.replace(old, new, 1)

    def test_errors(self):
        inputs = backward_ops_inputs(self.module)
        three = self.edit_backward_ops(
            '"pe.attention_grad"(%arg0, %9, %arg1, %40#0, %40#1, %arg1, %arg10)',
            '"pe.attention_grad"(%arg0, %9, %arg1, %40#0, %40#1, %arg1)')
        with self.assertRaisesRegex(ii.InterpreterError, "pe.attention_grad: 4 results"):
            ii.evaluate(three, {}, inputs, D64, "backward_ops")
        unlike = self.edit_backward_ops(
            '"pe.broadcast_to"(%arg5, %arg0) : (tensor<f32>, tensor<?x3x4xf32>)',
            '"pe.broadcast_to"(%arg5) : (tensor<f32>)')
        with self.assertRaisesRegex(ii.InterpreterError, "needs 'like'"):
            ii.evaluate(unlike, {}, inputs, D64, "backward_ops")
        wrong = self.edit_backward_ops("-> (tensor<?x3x4xf32>, tensor<4xf32>, tensor<4xf32>)",
                                       "-> (tensor<?x3x4xf32>, tensor<5xf32>, tensor<4xf32>)")
        with self.assertRaisesRegex(ii.InterpreterError, "pe.layer_norm_grad.*result 1"):
            ii.evaluate(wrong, {}, inputs, D64, "backward_ops")
        with self.assertRaisesRegex(ii.InterpreterError, "no function @nope"):
            ii.evaluate(self.module, {}, inputs, D64, "nope")


# ------------------------------------------------------- the real pass --

def _tool_dirs():
    dirs = [os.environ.get("STRINGC_BIN_DIR", "")]
    dirs += sorted(glob.glob(os.path.join(REPO, "build*", "bin")))
    return [d for d in dirs if d and os.path.isdir(d)]


def _has_option(tool, option):
    r = subprocess.run([tool, "--help"], capture_output=True, text=True, timeout=60)
    return option in r.stdout


def find_tools():
    """(stringc, string-opt with --pe-autodiff), from one directory when one
    has both, else each from the first directory that has it; None if absent."""
    found = []
    for d in _tool_dirs():
        stringc, opt = os.path.join(d, "stringc"), os.path.join(d, "string-opt")
        found.append((stringc if os.access(stringc, os.X_OK) else None,
                      opt if os.access(opt, os.X_OK) and _has_option(opt, "--pe-autodiff")
                      else None))
    for stringc, opt in found:
        if stringc and opt:
            return stringc, opt
    return (next((s for s, _ in found if s), None), next((o for _, o in found if o), None))


def perturbed_init_params(module, seed=0):
    """init_params in float64; parameters initialised to a constant (zeros,
    ones) get N(0, 0.1^2) noise, so that no factor of 1 or 0 hides a wrong
    gradient term."""
    params = ii.init_params(module, EXAMPLES, dtype=D64)
    g = torch.Generator().manual_seed(seed)
    for name, p in module.parameters.items():
        if p.init in ("zeros", "ones", "constant"):
            params[name] = params[name] + 0.1 * torch.randn(params[name].shape, generator=g,
                                                            dtype=D64)
    return params


class TestAutodiffPass(Case):
    @classmethod
    def setUpClass(cls):
        cls.stringc, cls.opt = find_tools()
        cls.examples = sorted(glob.glob(os.path.join(EXAMPLES, "*.pe")))

    def need_tools(self, stringc=True):
        if stringc and not self.stringc:
            self.skipTest("stringc is not built")
        if not self.opt:
            self.skipTest("no string-opt with --pe-autodiff is built")

    def run_tool(self, cmd, stdin=None):
        r = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=120)
        if r.returncode and "does not implement DifferentiableOpInterface" in r.stderr:
            op = next((ln for ln in r.stderr.splitlines() if "error:" in ln), r.stderr)
            self.skipTest(f"pe-autodiff has no vector-Jacobian product for an op yet: {op}")
        self.assertEqual(r.returncode, 0, f"{' '.join(cmd)}:\n{r.stderr}")
        return r.stdout

    def differentiate(self, example, with_source=False):
        """The example's module in generic form, with @gradients (and, with
        with_source, the module as stringc built it, before the pass)."""
        mlir = self.run_tool([self.stringc, example, "--emit=mlir"] + check_defines(example))
        out = self.run_tool([self.opt, "--pe-autodiff", "--mlir-print-op-generic", "-"], mlir)
        if not with_source:
            return out
        return out, self.run_tool([self.opt, "--mlir-print-op-generic", "-"], mlir)

    def test_backward_ops_input_is_valid_ir(self):
        self.need_tools(stringc=False)
        self.run_tool([self.opt, BACKWARD_OPS])

    def test_examples(self):
        self.need_tools()
        self.assertTrue(self.examples)
        for example in self.examples:
            name = os.path.basename(example)
            with self.subTest(example=name):
                self.check_example(example, batch=1 if name == "vit_generators.pe" else 2)

    def test_mean_over_the_batch(self):
        """pe.mean_grad divides by the batch size read at run time: the
        gradients of GradInputs/batch_mean.pe match autograd for several B."""
        self.need_tools()
        for batch in (1, 3, 5):
            with self.subTest(batch=batch):
                self.check_example(BATCH_MEAN, batch=batch)

    def test_dropout(self):
        """pe.dropout (per element and per sample) at several step keys and
        batch sizes: @gradients matches autograd through @forward as stringc
        built it, whose masks are the same key's; the pass leaves @forward
        (the evaluation) without dropout."""
        self.need_tools()
        for batch, key in ((1, (0, 0, 0)), (3, (7, 5, 0)), (4, ((1 << 40) + 3, 123456, 9))):
            with self.subTest(batch=batch, key=key):
                self.check_example(DROPOUT, batch=batch, step_key=key)
        text, source = self.differentiate(DROPOUT, with_source=True)
        after, before = ii.load_module(text), ii.load_module(source)

        def dropouts(m, f):
            return [op.attributes.get("per_sample", False)
                    for op in mg.walk([m.function(f)]) if op.name == "pe.dropout"]
        # dropout(p = 0) emits nothing; one dropout and one drop_path, in
        # @gradients twice each (forward, VJP).
        self.assertEqual(sorted(dropouts(before, "forward")), [False, True])
        self.assertEqual(dropouts(after, "forward"), [])
        self.assertEqual(sorted(dropouts(after, "gradients")), [False, False, True, True])

    def test_cpu_target_training_program(self):
        """The training program of a --target=cpu package (all the passes,
        and after pe-autodiff the CPU's own: residual adds fused into
        pe.linear_residual, the sums of Q, K and V's input gradients into
        pe.linear_grad_input_acc, the residual stream's into
        pe.layer_norm_grad_acc) has the loss and gradients autograd gives
        through the model as written."""
        self.need_tools()
        example = os.path.join(EXAMPLES, "vit_rope.pe")
        train = self.run_tool([self.stringc, example, "--target=cpu", "--emit=pe-train"])
        module = ii.load_module(self.run_tool([self.opt, "--mlir-print-op-generic", "-"], train))
        ops = [op.name for op in mg.walk([module.function("gradients")])]
        self.assertEqual(ops.count("pe.linear_residual"), 8)  # 2 residual adds x 4 blocks
        self.assertEqual(ops.count("pe.linear_grad_input_acc"), 8)  # (gv + gk) + gq x 4
        self.assertEqual(ops.count("pe.layer_norm_grad_acc"), 8)  # 2 pre-norms x 4 blocks
        self.assertEqual(ops.count("pe.add"), 0)  # every add of the step fused
        _, source = self.differentiate(example, with_source=True)
        written = ii.load_module(source)
        params = perturbed_init_params(module)
        inputs = random_inputs(module, batch=2, seed=7)
        ref, want = ii.loss_and_grads(written, params, inputs, dtype=D64)
        with torch.no_grad():
            got = ii.evaluate(module, params, inputs, dtype=D64, function="gradients")
        self.close(got["loss"], ref["loss"].detach(), what="loss")
        scale = max(g.abs().max().item() for g in want.values())
        for n, g in want.items():
            self.close(got[n], g, rel=REL_TOL, floor=1e-6 * scale, what=n)

    def check_example(self, example, batch, step_key=(0, 0, 0)):
        name = os.path.basename(example)
        text, source = self.differentiate(example, with_source=True)
        module, written = ii.load_module(text), ii.load_module(source)
        trainable = [n for n, p in module.parameters.items() if not p.frozen]
        frozen = [n for n, p in module.parameters.items() if p.frozen]
        # exactly the trainable parameters, in declaration order, with their types
        grads = module.gradients()
        self.assertEqual([n for n, _ in grads], trainable, name)
        for n, ty in grads:
            self.assertEqual(tuple(ty.shape), tuple(module.parameters[n].type.shape), n)
        self.assertFalse(set(frozen) & {n for n, _ in grads}, name)
        self.assertEqual([n for n, _ in module.inputs("gradients")],
                         [n for n, _ in module.inputs("forward")], name)
        self.assertEqual(module.outputs("gradients")[0][0], "loss", name)

        params = perturbed_init_params(module)
        inputs = random_inputs(module, batch=batch, seed=7)
        ref, want = ii.loss_and_grads(written, params, inputs, dtype=D64, step_key=step_key)
        with torch.no_grad():
            got = ii.evaluate(module, params, inputs, dtype=D64, function="gradients",
                              step_key=step_key)
        self.close(got["loss"], ref["loss"].detach(), what=f"{name}: loss")
        scale = max(g.abs().max().item() for g in want.values())
        for n in trainable:
            self.assertTrue(torch.isfinite(got[n]).all(), f"{name}: {n}")
            self.close(got[n], want[n], rel=REL_TOL, floor=1e-6 * scale, what=f"{name}: {n}")

    def test_emit_pe_train(self):
        """stringc --emit=pe-train prints the module that string-opt
        --pe-autodiff gives (same @gradients ops and results); with the
        optimisation passes off (--pass-pipeline=), the passes being
        checked on their own in tests/unit/passes."""
        self.need_tools()
        if not _has_option(self.stringc, "--emit=pe-train"):
            self.skipTest("stringc has no --emit=pe-train yet")
        example = os.path.join(EXAMPLES, "vit_rope.pe")
        via_opt = ii.load_module(self.differentiate(example))
        train = self.run_tool([self.stringc, example, "--emit=pe-train", "--pass-pipeline="])
        via_stringc = ii.load_module(self.run_tool([self.opt, "--mlir-print-op-generic", "-"],
                                                   train))
        for m in (via_opt, via_stringc):
            self.assertIn("gradients", m.functions)

        def signature(m):
            f = m.function("gradients")
            return ([op.name for op in mg.walk([f])], m.outputs("gradients"),
                    m.inputs("gradients"))

        self.assertEqual(signature(via_stringc), signature(via_opt))


if __name__ == "__main__":
    unittest.main()
