"""Tests of the generic-IR parser, the interpreter and the safetensors helpers.

The hand-written modules in Inputs/ are evaluated and compared with the same
computation written directly with pe_torch. When string-opt (and stringc) are
built, real printer output is interpreted too: the directory comes from
$STRINGC_BIN_DIR, else build/bin or build-dialect/bin of the repository.
"""

import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import ir_interpreter as ii  # noqa: E402
import mlir_generic as mg  # noqa: E402
from example_sizes import check_defines  # noqa: E402
import pe_torch as pt  # noqa: E402
from safetensors_io import read_safetensors, save_safetensors  # noqa: E402

torch.set_num_threads(1)
D64 = torch.float64


def read_input(name):
    with open(os.path.join(HERE, "Inputs", name)) as f:
        return f.read()


def random_params(module, seed=0, dtype=D64):
    g = torch.Generator().manual_seed(seed)
    return {n: 0.5 * torch.randn(p.type.shape, generator=g, dtype=dtype)
            for n, p in module.parameters.items()}


def int_input_bounds(module):
    """For each i32 input, the exclusive upper bound its uses allow."""
    f = module.function()
    args = [a for a, _ in f.regions[0][0].args]
    names = dict(zip(args, (n for n, _ in module.inputs())))
    bounds = {}
    for op in f.regions[0][0].ops:
        for pos, operand in enumerate(op.operands):
            if operand not in names:
                continue
            if op.name == "pe.token_embed" and pos == 0:
                bound = op.operand_types[1].shape[0]
            elif op.name == "pe.cross_entropy" and pos == 1:
                bound = op.operand_types[0].shape[-1]
            else:
                continue
            bounds[names[operand]] = min(bound, bounds.get(names[operand], bound))
    return bounds


def random_inputs(module, batch=2, seed=1):
    g = torch.Generator().manual_seed(seed)
    bounds = int_input_bounds(module)
    out = {}
    for name, ty in module.inputs():
        shape = tuple(batch if d is None else d for d in ty.shape)
        if ty.element.startswith("f"):
            out[name] = torch.randn(shape, generator=g, dtype=D64)
        else:
            out[name] = torch.randint(0, bounds.get(name, 1), shape, generator=g).to(torch.int32)
    return out


class Case(unittest.TestCase):
    def close(self, a, b, tol=1e-12):
        self.assertEqual(tuple(a.shape), tuple(b.shape))
        err = (a - b).abs().max().item() if a.numel() else 0.0
        self.assertLessEqual(err, tol, f"max abs error {err}")


# ------------------------------------------------------------------ parser --

class TestParser(Case):
    def test_attribute_values(self):
        cases = [
            ("17 : i64", 17), ("-4 : i64", -4), ("2.000000e-02 : f64", 0.02),
            ("9.9999999999999995E-7 : f64", 1e-6), ("0x3F800000 : f32", 1.0),
            ("0x3FE0000000000000 : f64", 0.5), ("true", True), ("false", False),
            ('"a\\"b\\\\c\\0A"', 'a"b\\c\n'), ("@encoder.0.wq", mg.SymbolRef("encoder.0.wq")),
            ("array<i64: 0, 2, 5>", [0, 2, 5]), ("array<i64>", []),
            ("#pe<mask causal>", "causal"), ("#pe.mask<skip>", "skip"),
            ("#pe<rope_mode axial>", "axial"), ("[1 : i64, \"x\"]", [1, "x"]),
            ("{pe.input = \"image\"}", {"pe.input": "image"}),
            ("{frozen, a = unit}", {"frozen": True, "a": True}),
        ]
        for text, want in cases:
            got = mg.parse_attribute(text)
            self.assertEqual(got, want, text)
            self.assertEqual(type(got), type(want), text)

    def test_types(self):
        self.assertEqual(mg.parse_attribute("tensor<?x50x64xf32>"),
                         mg.TensorType((None, 50, 64), "f32"))
        self.assertEqual(mg.parse_attribute("tensor<f32>"), mg.TensorType((), "f32"))
        self.assertEqual(mg.parse_attribute("tensor<7xindex>"), mg.TensorType((7,), "index"))
        ft = mg.parse_attribute("(tensor<?xi32>) -> (tensor<f32>, tensor<?x10xf32>)")
        self.assertEqual(ft.inputs, (mg.TensorType((None,), "i32"),))
        self.assertEqual(len(ft.results), 2)
        single = mg.parse_attribute("(tensor<2xf32>) -> tensor<2xf32>")
        self.assertEqual(single.results, (mg.TensorType((2,), "f32"),))

    def test_dense(self):
        t = mg.parse_attribute('dense<"0x0000803F00000040"> : tensor<2xf32>')
        self.assertTrue(torch.equal(t, torch.tensor([1.0, 2.0])))
        t = mg.parse_attribute("dense<[[1, 2], [3, 4]]> : tensor<2x2xi64>")
        self.assertTrue(torch.equal(t, torch.tensor([[1, 2], [3, 4]])))
        t = mg.parse_attribute("dense<2.5> : tensor<3xf32>")
        self.assertTrue(torch.equal(t, torch.full((3,), 2.5)))

    def test_module_structure(self):
        m = ii.load_module(read_input("vit_tiny.mlir"))
        self.assertEqual(list(m.parameters)[:3], ["w_patch", "b_patch", "cls"])
        wq = m.parameters["encoder.0.wq"]
        self.assertTrue(wq.frozen)
        self.assertEqual((wq.init, wq.attributes["file"], wq.attributes["tensor"]),
                         ("load", "weights.safetensors", "wq"))
        self.assertFalse(m.parameters["w_patch"].frozen)
        self.assertEqual(m.parameters["w_patch"].attributes["seed"], 1)
        self.assertEqual(m.optimizer["kind"], "adamw")
        self.assertEqual(m.optimizer["warmup_steps"], 10)
        self.assertEqual(m.dataset["kind"], "idx")
        self.assertEqual([n for n, _ in m.inputs()], ["image", "label"])
        self.assertEqual([n for n, _ in m.outputs()], ["loss", "logits"])
        ops = [op.name for op in mg.walk(m.ops)]
        self.assertEqual(ops.count("pe.rope"), 2)
        rope = next(op for op in mg.walk(m.ops) if op.name == "pe.rope")
        self.assertEqual(rope.attributes["mode"], "axial")
        self.assertEqual(rope.result_types[0], mg.TensorType((None, 5, 8), "f32"))
        self.assertEqual(rope.line, 35)

    def test_locations_and_aliases(self):
        m = ii.load_module(read_input("gpt_tiny.mlir"))
        att = [op for op in mg.walk(m.ops) if op.name == "pe.attention"]
        self.assertEqual([a.attributes["mask"] for a in att], ["skip", "causal"])
        self.assertEqual(att[0].attributes["scale"], 0.5)
        self.assertEqual(att[0].attributes["skip_base"], 1)

    def test_multiple_results_and_nested_regions(self):
        ops = mg.parse("""
          "test.outer"() ({
            %0:2 = "test.pair"() {note = "x"} : () -> (f32, tensor<2xf32>)
            "test.use"(%0#1, %0#0) : (tensor<2xf32>, f32) -> ()
          ^bb1(%a: f32):  // a second block
            "test.end"(%a) : (f32) -> ()
          }, {
          }) : () -> ()
        """)
        self.assertEqual(len(ops), 1)
        blocks = ops[0].regions[0]
        self.assertEqual(len(ops[0].regions), 2)
        self.assertEqual(len(blocks), 2)
        pair, use = blocks[0].ops
        self.assertEqual(pair.results, ["%0#0", "%0#1"])
        self.assertEqual(pair.attributes, {"note": "x"})
        self.assertEqual(use.operands, ["%0#1", "%0#0"])
        self.assertEqual(blocks[1].args, [("%a", mg.ScalarType("f32"))])
        self.assertEqual([op.name for op in mg.walk(ops)],
                         ["test.outer", "test.pair", "test.use", "test.end"])

    def test_custom_form_is_rejected(self):
        with self.assertRaises(mg.ParseError) as cm:
            mg.parse("module {\n  pe.parameter @w : tensor<2xf32> {init = \"zeros\"}\n}\n")
        self.assertIn("generic", str(cm.exception))


# ------------------------------------------------------------ interpreter --

def vit_tiny_direct(p, image, label):
    x = pt.class_token(pt.patch_embed(image, p["w_patch"], p["b_patch"], 2), p["cls"])
    pos = pt.grid_positions(2, 2, 1, dtype=D64)
    freqs = pt.rope_freqs("axial", 8, 2, 100.0, dtype=D64)
    h = pt.layer_norm(x, p["ln_g"], p["ln_b"], 1e-6)
    q = pt.rope(pt.linear(h, p["encoder.0.wq"]), pos, freqs)
    k = pt.rope(pt.linear(h, p["encoder.0.wk"]), pos, freqs)
    a = pt.attention(q, k, pt.linear(h, p["encoder.0.wv"]), 2, 0.5)
    y = pt.gelu(pt.add(x, a), approximate=True)
    logits = pt.linear(pt.select_token(y, 0), p["w_head"], p["b_head"])
    return pt.cross_entropy(logits, label), logits


def gpt_tiny_direct(p, tokens, targets):
    x = pt.add(pt.token_embed(tokens, p["wte"]), pt.sinusoidal(6, 8, 1e4, dtype=D64))
    wq, wk, wv = p["decoder.0.wq"], p["decoder.0.wk"], p["decoder.0.wv"]
    a = pt.attention(pt.linear(x, wq), pt.linear(x, wk), pt.linear(x, wv), 2, 0.5, "skip", 1)
    x = pt.add(x, a)
    pos, freqs = pt.seq_positions(6, dtype=D64), pt.rope_freqs("seq", 8, 2, 1e4, dtype=D64)
    q, k = pt.rope(pt.linear(x, wq), pos, freqs), pt.rope(pt.linear(x, wk), pos, freqs)
    y = pt.relu(pt.attention(q, k, x, 2, 3.535534e-01, "causal"))
    logits = pt.linear(y, p["w_out"])
    return pt.cross_entropy(logits, targets), logits


def structured_direct(p, x):
    y = pt.cayley(x, pt.skew(p["s"], 6))
    y = pt.cayley(y, pt.sparse_skew(p["sp"], 6, [0, 7, 14]))
    y = pt.householder(y, pt.seq_positions(2, 1, dtype=D64), p["f1"], p["f2"])
    y = pt.spd_gate(y, p["gamma"])
    grid = pt.grid_positions(1, 3, dtype=D64)
    L = pt.skew(p["gen"], 3)
    a = pt.attention(y, y, x, 2, 5.773503e-01, rel=pt.generator_exp(pt.relative_positions(grid), L))
    r = pt.apply_rotation(a, pt.generator_exp(grid, L), 2)
    d = pt.sub(r, x)
    loss = pt.add(pt.mean(pt.mean(pt.mul(d, d), 1)), pt.scale(pt.commutator_norm(L), 0.1, 0.25))
    return loss, pt.gelu(r)


class TestInterpreter(Case):
    def run_case(self, name, direct, arg_names):
        module = ii.load_module(read_input(name))
        params, inputs = random_params(module), random_inputs(module)
        out = ii.evaluate(module, params, inputs, dtype=D64)
        want = direct(params, *[inputs[n] for n in arg_names])
        self.assertEqual(list(out), [n for n, _ in module.outputs()])
        for got, ref in zip(out.values(), want):
            self.close(got, ref)
        self.assertTrue(all(torch.isfinite(t).all() for t in out.values()))
        return module, params, inputs

    def test_vit_tiny(self):
        self.run_case("vit_tiny.mlir", vit_tiny_direct, ["image", "label"])

    def test_gpt_tiny(self):
        self.run_case("gpt_tiny.mlir", gpt_tiny_direct, ["tokens", "targets"])

    def test_structured(self):
        self.run_case("structured.mlir", structured_direct, ["x"])

    def test_float32_default(self):
        module = ii.load_module(read_input("structured.mlir"))
        out = ii.evaluate(module, random_params(module), random_inputs(module))
        self.assertTrue(all(t.dtype == torch.float32 for t in out.values()))
        self.assertEqual(tuple(out["features"].shape), (2, 3, 6))

    def test_grads_match_direct_autograd(self):
        module = ii.load_module(read_input("gpt_tiny.mlir"))
        params, inputs = random_params(module, seed=3), random_inputs(module, seed=4)
        _, grads = ii.loss_and_grads(module, params, inputs, dtype=D64)
        self.assertEqual(sorted(grads), ["decoder.0.wv", "w_out", "wte"])     # wq, wk frozen
        leaves = {n: t.clone().requires_grad_() for n, t in params.items()}
        loss, _ = gpt_tiny_direct(leaves, inputs["tokens"], inputs["targets"])
        loss.backward()
        for n, g in grads.items():
            self.close(g, leaves[n].grad)
            self.assertGreater(g.abs().max().item(), 0.0, n)

    def test_grads_gradcheck_structured(self):
        module = ii.load_module(read_input("structured.mlir"))
        params, inputs = random_params(module, seed=5), random_inputs(module, batch=1, seed=6)
        names = list(params)

        def loss(*values):
            return ii.evaluate(module, dict(zip(names, values)), inputs, dtype=D64)["loss"]

        leaves = tuple(params[n].clone().requires_grad_() for n in names)
        self.assertTrue(torch.autograd.gradcheck(loss, leaves, eps=1e-6, atol=1e-6, rtol=1e-5))

    def test_init_params(self):
        module = ii.load_module(read_input("vit_tiny.mlir"))
        with tempfile.TemporaryDirectory() as tmp:
            wq = torch.arange(64, dtype=torch.float32).reshape(8, 8)
            save_safetensors(os.path.join(tmp, "weights.safetensors"), {"wq": wq})
            p = ii.init_params(module, base_dir=tmp)
            again = ii.init_params(module, base_dir=tmp)
        self.assertTrue(torch.equal(p["encoder.0.wq"], wq))
        self.assertTrue(torch.equal(p["b_patch"], torch.full((8,), 0.1)))
        self.assertTrue(torch.equal(p["ln_g"], torch.ones(8)))
        self.assertTrue(torch.equal(p["ln_b"], torch.zeros(8)))
        self.assertTrue(torch.equal(p["w_patch"], again["w_patch"]))        # seeded
        self.assertFalse(torch.equal(p["encoder.0.wk"], p["encoder.0.wv"]))
        self.assertTrue(((p["cls"] >= -0.5) & (p["cls"] < 0.5)).all())
        self.assertTrue(all(t.dtype == torch.float32 for t in p.values()))

    def test_errors(self):
        text = read_input("vit_tiny.mlir")
        module = ii.load_module(text)
        params, inputs = random_params(module), random_inputs(module)
        missing = dict(params)
        del missing["cls"]
        with self.assertRaisesRegex(ii.InterpreterError, "missing parameter 'cls'"):
            ii.evaluate(module, missing, inputs)
        bad = dict(inputs, image=torch.zeros(2, 1, 4, 5))
        with self.assertRaisesRegex(ii.InterpreterError, "input image"):
            ii.evaluate(module, params, bad)
        with self.assertRaisesRegex(ii.InterpreterError, "missing input 'label'"):
            ii.evaluate(module, params, {"image": inputs["image"]})
        wrong = text.replace("-> tensor<?x4x8xf32>\n", "-> tensor<?x3x8xf32>\n", 1)
        with self.assertRaisesRegex(ii.InterpreterError, r"line 22: pe.patch_embed.*IR declares"):
            ii.evaluate(wrong, params, inputs)
        unknown = text.replace('"pe.relu"', '"pe.nope"').replace('"pe.gelu"', '"pe.nope"')
        with self.assertRaisesRegex(ii.InterpreterError, "pe.nope: unsupported op"):
            ii.evaluate(unknown, params, inputs)
        mode = text.replace("#pe.rope_mode<axial>", "#pe.rope_mode<seq>", 1)
        with self.assertRaisesRegex(ii.InterpreterError, "mode seq"):
            ii.evaluate(mode, params, inputs)

    def test_command_line(self):
        module = ii.load_module(read_input("gpt_tiny.mlir"))
        params, inputs = random_params(module, dtype=torch.float32), random_inputs(module)
        with tempfile.TemporaryDirectory() as tmp:
            paths = {k: os.path.join(tmp, k + ".safetensors") for k in ("p", "i", "o")}
            model = os.path.join(tmp, "m.mlir")
            with open(model, "w") as f:
                f.write(read_input("gpt_tiny.mlir"))
            save_safetensors(paths["p"], params)
            save_safetensors(paths["i"], inputs)
            rc = ii.main([model, "--params", paths["p"], "--inputs", paths["i"],
                          "--out", paths["o"], "--grads"])
            self.assertEqual(rc, 0)
            out, _ = read_safetensors(paths["o"])
        self.assertEqual(sorted(out), ["grad.decoder.0.wv", "grad.w_out", "grad.wte",
                                       "logits", "loss"])
        ref = ii.evaluate(module, params, inputs)
        self.close(out["loss"], ref["loss"].detach(), 1e-6)
        self.assertEqual(out["loss"].dtype, torch.float32)


# -------------------------------------------------------------- safetensors --

class TestSafetensors(Case):
    def test_round_trip(self):
        tensors = {"w": torch.randn(3, 4), "ids": torch.arange(5, dtype=torch.int32),
                   "scalar": torch.tensor(2.5, dtype=D64), "empty": torch.zeros(0, 2),
                   "h": torch.randn(3).to(torch.bfloat16), "b": torch.tensor([True, False])}
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "t.safetensors")
            save_safetensors(path, tensors, metadata={"format": "pt"})
            back, meta = read_safetensors(path)
            with open(path, "rb") as f:
                raw = f.read()
        self.assertEqual(meta, {"format": "pt"})
        for n, t in tensors.items():
            self.assertEqual(back[n].dtype, t.dtype, n)
            self.assertTrue(torch.equal(back[n], t), n)
        (n,) = struct.unpack("<Q", raw[:8])
        self.assertEqual(n % 8, 0)
        header = json.loads(raw[8:8 + n])
        self.assertEqual(header["w"]["dtype"], "F32")
        self.assertEqual(header["w"]["shape"], [3, 4])
        begin, end = header["w"]["data_offsets"]
        self.assertEqual(end - begin, 48)
        self.assertEqual(raw[8 + n + begin:8 + n + end], tensors["w"].numpy().tobytes())

    def test_reads_handmade_file(self):
        header = {"__metadata__": {"k": "v"},
                  "b": {"dtype": "I64", "shape": [2], "data_offsets": [8, 24]},
                  "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}
        text = json.dumps(header).encode()
        data = struct.pack("<2f", 1.5, -2.0) + struct.pack("<2q", 7, -9)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "h.safetensors")
            with open(path, "wb") as f:
                f.write(struct.pack("<Q", len(text)) + text + data)
            back = ii.params_from_safetensors(path)
        self.assertTrue(torch.equal(back["a"], torch.tensor([1.5, -2.0])))
        self.assertTrue(torch.equal(back["b"], torch.tensor([7, -9])))

    def test_rejects_inconsistent_offsets(self):
        text = json.dumps({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}).encode()
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "bad.safetensors")
            with open(path, "wb") as f:
                f.write(struct.pack("<Q", len(text)) + text + bytes(8))
            with self.assertRaises(ValueError):
                read_safetensors(path)


# ------------------------------------------------------- real printer output --

def find_tool(name):
    dirs = [os.environ.get("STRINGC_BIN_DIR", "")]
    dirs += [os.path.join(REPO, "build", "bin"), os.path.join(REPO, "build-dialect", "bin")]
    for d in dirs:
        path = os.path.join(d, name) if d else ""
        if path and os.access(path, os.X_OK):
            return path
    return shutil.which(name)


class TestPrinterOutput(Case):
    """Interprets what string-opt and stringc really print."""

    def check_module(self, text, what):
        """Evaluate with random values; outputs and the gradients of their sum
        with respect to every float parameter and input must be finite."""
        module = ii.load_module(text)
        params, inputs = random_params(module), random_inputs(module)
        leaves = [t.requires_grad_() for t in list(params.values()) + list(inputs.values())
                  if t.is_floating_point()]
        out = ii.evaluate(module, params, inputs, dtype=D64)
        for (name, ty), t in zip(module.outputs(), out.values()):
            self.assertTrue(torch.isfinite(t).all(), f"{what}: {name}")
            self.assertEqual(t.dim(), len(ty.shape), f"{what}: {name}")
        total = sum(t.sum() for t in out.values())
        if leaves and total.requires_grad:
            for g in torch.autograd.grad(total, leaves, allow_unused=True):
                self.assertTrue(g is None or torch.isfinite(g).all(), what)

    def generic(self, opt, args, stdin=None):
        r = subprocess.run([opt, "--mlir-print-op-generic"] + args, input=stdin,
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout

    def test_round_trip_file(self):
        opt = find_tool("string-opt")
        if not opt:
            self.skipTest("string-opt is not built")
        src = os.path.join(REPO, "tests", "lit", "Dialect", "round-trip.mlir")
        text = self.generic(opt, [src, "-split-input-file"])
        modules = [m for m in text.split("// -----") if '"func.func"' in m]
        self.assertGreater(len(modules), 0)
        for n, m in enumerate(modules):
            with self.subTest(module=n):
                self.check_module(m, f"round-trip module {n}")

    def test_inputs_are_valid_ir(self):
        opt = find_tool("string-opt")
        if not opt:
            self.skipTest("string-opt is not built")
        for name in sorted(os.listdir(os.path.join(HERE, "Inputs"))):
            with self.subTest(input=name):
                self.generic(opt, [os.path.join(HERE, "Inputs", name)])

    def test_examples(self):
        opt, stringc = find_tool("string-opt"), find_tool("stringc")
        if not (opt and stringc):
            self.skipTest("stringc is not built")
        examples = os.path.join(REPO, "examples")
        for name in sorted(os.listdir(examples)):
            if not name.endswith(".pe"):
                continue
            with self.subTest(example=name):
                path = os.path.join(examples, name)
                r = subprocess.run([stringc, "--emit=mlir", path] + check_defines(path),
                                   capture_output=True, text=True, timeout=120)
                self.assertEqual(r.returncode, 0, r.stderr)
                text = self.generic(opt, ["-"], r.stdout)
                self.check_module(text, name)
                # With the declared initializers the model starts near chance:
                # loss ~ log(number of classes).
                module = ii.load_module(text)
                ce = next(op for op in mg.walk(module.ops) if op.name == "pe.cross_entropy")
                classes = ce.operand_types[0].shape[-1]
                out = ii.evaluate(module, ii.init_params(module, examples), random_inputs(module))
                self.assertLess(abs(out["loss"].item() - math.log(classes)), 0.3, name)


if __name__ == "__main__":
    unittest.main()
