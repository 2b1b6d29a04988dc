"""Reference evaluator of a `pe` module printed in MLIR's generic form.

`string-opt --mlir-print-op-generic model.mlir` gives text this module reads;
each op of a function (`func.func @forward` unless told otherwise, e.g.
`@gradients` from `string-opt --pe-autodiff`) is evaluated with its pe_torch
function (forward ops), its pe_torch_grad function (the backward ops of
docs/autodiff.md) or torch (`arith.constant`), given the parameter tensors
(by symbol name, e.g. "encoder.0.wq") and the model inputs (by their
`pe.input` names). Every result is checked against the type the IR declares
for it. The outputs come back in the function's result order, named by
`pe.output` (the loss first) or, for the results of `@gradients`, by
`pe.grad` (the parameter's name).

Command line (all files safetensors):
  ir_interpreter.py MODEL.mlir --params P --inputs I --out O [--function F]
                    [--grads] [--float64]
writes the outputs of @F (default forward), and with --grads the gradient
of its loss with respect to every trainable parameter as "grad.NAME".
"""

import argparse
import math
import os
import sys
from collections import OrderedDict
from dataclasses import dataclass

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import pe_torch as pt                                       # noqa: E402
import pe_torch_grad as pg                                  # noqa: E402
from mlir_generic import TensorType, parse, walk            # noqa: E402
from op_schema import OP_SCHEMA, RESULTS_FOLLOW_OPERANDS, SAVED_RESULT    # noqa: E402
from safetensors_io import params_from_safetensors, save_safetensors  # noqa: E402


class InterpreterError(Exception):
    """The module cannot be evaluated (unknown op, bad shapes, missing values)."""


@dataclass
class Parameter:
    """A `pe.parameter` declaration: its type, initializer and companions."""
    name: str
    type: TensorType
    init: str
    attributes: dict
    frozen: bool


class Module:
    """A parsed pe module: its parameters and its functions."""

    def __init__(self, ops):
        self.ops = ops
        self.parameters = OrderedDict()
        self.functions = {}
        self.optimizer = None
        self.dataset = None
        for op in walk(ops):
            a = op.attributes
            if op.name == "pe.parameter":
                self.parameters[a["sym_name"]] = Parameter(
                    a["sym_name"], a["type"], a.get("init", ""), a,
                    bool(a.get("frozen", False)))
            elif op.name == "func.func":
                self.functions[a["sym_name"]] = op
            elif op.name == "pe.optimizer":
                self.optimizer = dict(a)
            elif op.name == "pe.dataset":
                self.dataset = dict(a)

    def function(self, name="forward"):
        if name in self.functions:
            return self.functions[name]
        if len(self.functions) == 1 and name == "forward":
            return next(iter(self.functions.values()))
        raise InterpreterError(f"no function @{name}")

    def inputs(self, function="forward"):
        """[(input name, TensorType)] of the function's arguments."""
        f = self.function(function)
        types = f.attributes["function_type"].inputs
        names = _names(f.attributes.get("arg_attrs"), ("pe.input",), "arg", len(types))
        return list(zip(names, types))

    def outputs(self, function="forward"):
        """[(result name, TensorType)] of the function's results: the
        `pe.output` name, else the `pe.grad` name (a parameter's)."""
        f = self.function(function)
        types = f.attributes["function_type"].results
        names = _names(f.attributes.get("res_attrs"), ("pe.output", "pe.grad"), "result",
                       len(types))
        if len(set(names)) != len(names):
            raise InterpreterError(f"@{function} has two results of the same name: {names}")
        return list(zip(names, types))

    def gradients(self, function="gradients"):
        """[(parameter name, TensorType)] of the results marked `pe.grad`."""
        f = self.function(function)
        types = f.attributes["function_type"].results
        attrs = f.attributes.get("res_attrs") or [{}] * len(types)
        return [(a["pe.grad"], t) for a, t in zip(attrs, types) if a and "pe.grad" in a]


def _names(attr_list, keys, prefix, n):
    attr_list = attr_list or [{}] * n
    names = []
    for k, a in enumerate(attr_list):
        found = [(a or {})[key] for key in keys if key in (a or {})]
        names.append(found[0] if found else f"{prefix}{k}")
    return names


def load_module(source):
    """A Module from generic-form text or from the path of a file holding it."""
    if "\n" not in source and os.path.exists(source):
        with open(source) as f:
            source = f.read()
    return Module(parse(source))


# ---------------------------------------------------------------- ops --

def _req(attrs, name, op):
    if name not in attrs:
        raise InterpreterError(f"{op}: missing attribute {name}")
    return attrs[name]


def _rope(args, a):
    x, pos, freqs = args
    mode = a["mode"]
    axes = {"seq": 1, "axial": 2, "mixed": 2}.get(mode)
    if axes is None or pos.shape[-1] != axes or freqs.shape[-1] != axes:
        raise InterpreterError(f"pe.rope mode {mode} with positions {tuple(pos.shape)}"
                               f" and frequencies {tuple(freqs.shape)}")
    return pt.rope(x, pos, freqs)


def _attention(args, a, types):
    """y, and the log-sum-exp when the op has its second result."""
    q, k, v = args[:3]
    rel = args[3] if len(args) > 3 else None
    mask = a["mask"]
    if mask == "skip" and "skip_base" not in a:
        raise InterpreterError("pe.attention: mask skip without skip_base")
    out = pt.attention(q, k, v, heads=a["heads"], scale=a["scale"], mask=mask,
                       skip_base=a.get("skip_base", 0), rel=rel, return_lse=len(types) == 2)
    return out if len(types) == 2 else (out,)


def _rope_attention(args, a, types):
    out = pt.rope_attention(*args, heads=a["heads"], scale=a["scale"], mask=a["mask"],
                            return_lse=len(types) == 2)
    return out if len(types) == 2 else (out,)


# Each entry: fn(args, attrs, dtype) -> tensor. Operand, result and attribute
# checks and attribute defaults come from the generated schema (op_schema.py).
OPS = {
    "pe.linear": (lambda x, a, d: pt.linear(*x)),
    "pe.layer_norm": (lambda x, a, d: pt.layer_norm(*x, eps=a["epsilon"])),
    "pe.gelu": (lambda x, a, d: pt.gelu(x[0], approximate=a["approximate"])),
    "pe.relu": (lambda x, a, d: pt.relu(x[0])),
    "pe.add": (lambda x, a, d: pt.add(*x)),
    "pe.sub": (lambda x, a, d: pt.sub(*x)),
    "pe.mul": (lambda x, a, d: pt.mul(*x)),
    "pe.scale": (lambda x, a, d: pt.scale(x[0], a["factor"],
                                                 a["bias"])),
    "pe.mean": (lambda x, a, d: pt.mean(x[0], a.get("axis"))),
    "pe.patch_embed": (lambda x, a, d: pt.patch_embed(
        *x, patch=a["patch"])),
    "pe.token_embed": (lambda x, a, d: pt.token_embed(*x)),
    "pe.class_token": (lambda x, a, d: pt.class_token(*x)),
    "pe.select_token": (lambda x, a, d: pt.select_token(
        x[0], a["index"])),
    "pe.cross_entropy": (lambda x, a, d: pt.cross_entropy(*x, smoothing=a["smoothing"])),
    "pe.seq_positions": (lambda x, a, d: pt.seq_positions(
        a["length"], a["special"], dtype=d)),
    "pe.grid_positions": (lambda x, a, d: pt.grid_positions(
        a["rows"], a["cols"],
        a["special"], dtype=d)),
    "pe.rope_freqs": (lambda x, a, d: pt.rope_freqs(
        a["kind"], a["dim"],
        a["heads"], a["base"], dtype=d)),
    "pe.rope": (lambda x, a, d: _rope(x, a)),
    "pe.householder": (lambda x, a, d: pt.householder(*x)),
    "pe.skew": (lambda x, a, d: pt.skew(x[0], a["dim"])),
    "pe.sparse_skew": (lambda x, a, d: pt.sparse_skew(
        x[0], a["dim"], a["support"])),
    "pe.cayley": (lambda x, a, d: pt.cayley(*x)),
    "pe.relative_positions": (lambda x, a, d: pt.relative_positions(x[0])),
    "pe.generator_exp": (lambda x, a, d: pt.generator_exp(*x)),
    "pe.apply_rotation": (lambda x, a, d: pt.apply_rotation(
        *x, heads=a["heads"])),
    "pe.commutator_norm": (lambda x, a, d: pt.commutator_norm(x[0])),
    "pe.spd_gate": (lambda x, a, d: pt.spd_gate(*x)),
    "pe.sinusoidal": (lambda x, a, d: pt.sinusoidal(
        a["length"], a["dim"],
        a["base"], dtype=d)),
    # Gather rewrites (pe-skip-gather, pe-distinct-offsets).
    "pe.skip_gather": (lambda x, a, d: pt.skip_gather(
        x[0], a["heads"], a["skip_base"])),
    "pe.pair_gather": (lambda x, a, d: pt.pair_gather(
        x[0], a["index"],
        math.isqrt(len(a["index"])))),
    # Hoisted tables and fused ops (pe-hoist, pe-fuse-attention, pe-fuse-epilogue).
    "pe.rope_table": (lambda x, a, d: pt.rope_table(*x)),
    "pe.rope_apply": (lambda x, a, d: pt.rope_apply(
        x[0], x[1], inverse=a["inverse"])),
    "pe.cayley_weight": (lambda x, a, d: pt.cayley_weight(x[0])),
    "pe.linear_residual": (lambda x, a, d: pt.linear_residual(*x)),
}


# ------------------------------------------------------- backward ops --

def _static(ty, dim, op):
    if not isinstance(ty, TensorType) or len(ty.shape) <= dim or ty.shape[dim] is None:
        raise InterpreterError(f"{op}: the result type {ty} needs a static dimension {dim}")
    return ty.shape[dim]


def _sum_to(args, a, types):
    x, (ty,) = args[0], types
    return (pg.sum_to(x, x.shape[x.dim() - len(ty.shape):]),)


def _broadcast_to(args, a, types):
    """The target is the result type; a dynamic dimension 0 takes its size
    from `like` (operand 1), or from x when x has that dimension."""
    x, shape = args[0], list(types[0].shape)
    if shape and shape[0] is None:
        if len(args) > 1:
            shape[0] = args[1].shape[0]
        elif x.dim() == len(shape):
            shape[0] = x.shape[0]
        else:
            raise InterpreterError("pe.broadcast_to: a new dynamic dimension 0 needs 'like'")
    if len(args) > 1 and tuple(args[1].shape) != tuple(shape):
        raise InterpreterError(f"pe.broadcast_to: 'like' has shape {tuple(args[1].shape)},"
                               f" the result {tuple(shape)}")
    return (pg.broadcast_to(x, shape),)


def _attention_grad(args, a, types):
    q, k, v, y, lse, dy = args[:6]
    rel = args[6] if len(args) > 6 else None
    if len(types) != (4 if rel is not None else 3):
        raise InterpreterError(f"pe.attention_grad: {len(types)} results for "
                               f"{len(args)} operands (drel exactly when rel is given)")
    mask = a["mask"]
    if (mask == "skip") != ("skip_base" in a):
        raise InterpreterError("pe.attention_grad: skip_base goes with mask skip, and only with it")
    return pg.attention_grad(q, k, v, y, lse, dy, heads=a["heads"],
                             scale=a["scale"], mask=mask,
                             skip_base=a.get("skip_base", 0), rel=rel)


def _one(fn):
    """Wraps a single-result function as a tuple-returning one."""
    return lambda x, a, t: (fn(x, a, t),)


def _with_prior(prior, grads):
    """The results of a gradient op whose first (dx) is added to `prior`: the
    _acc ops pe-fuse-residual makes after pe-autodiff (--target=cpu)."""
    return (prior + grads[0],) + tuple(grads[1:])


# Each entry: fn(args, attrs, result types) -> tuple of tensors.
GRAD_OPS = {
    "pe.sum_to": (_sum_to),
    "pe.broadcast_to": (_broadcast_to),
    "pe.expand_axis": (_one(lambda x, a, t: pg.expand_axis(
        x[0], a["axis"], a["size"]))),
    "pe.mean_grad": (_one(lambda x, a, t: pg.mean_grad(x[0], x[1], a.get("axis")))),
    "pe.linear_grad_input": (_one(lambda x, a, t: pg.linear_grad_input(*x))),
    # pe-fuse-residual's gradient sums (after pe-autodiff, --target=cpu).
    "pe.linear_grad_input_acc": (_one(lambda x, a, t: x[0] + pg.linear_grad_input(x[1], x[2]))),
    "pe.linear_grad_weight": (_one(lambda x, a, t: pg.linear_grad_weight(*x))),
    "pe.layer_norm_grad": (lambda x, a, t: pg.layer_norm_grad(
        *x, eps=a["epsilon"])),
    "pe.layer_norm_grad_acc": (lambda x, a, t: _with_prior(x[0], pg.layer_norm_grad(
        *x[1:], eps=a["epsilon"]))),
    "pe.gelu_grad": (_one(lambda x, a, t: pg.gelu_grad(
        *x, approximate=a["approximate"]))),
    "pe.relu_grad": (_one(lambda x, a, t: pg.relu_grad(*x))),
    "pe.patch_embed_grad": (lambda x, a, t: pg.patch_embed_grad(
        *x, patch=a["patch"])),
    "pe.token_embed_grad": (_one(lambda x, a, t: pg.token_embed_grad(
        *x, vocab=_static(t[0], 0, "pe.token_embed_grad")))),
    "pe.class_token_grad": (lambda x, a, t: pg.class_token_grad(x[0])),
    "pe.select_token_grad": (_one(lambda x, a, t: pg.select_token_grad(
        x[0], a["index"],
        _static(t[0], 1, "pe.select_token_grad")))),
    "pe.attention_grad": (_attention_grad),
    "pe.cross_entropy_grad": (_one(lambda x, a, t: pg.cross_entropy_grad(
        *x, smoothing=a["smoothing"]))),
    "pe.rope_grad_freqs": (_one(lambda x, a, t: pg.rope_grad_freqs(*x))),
    "pe.householder_grad_freqs": (lambda x, a, t: pg.householder_grad_freqs(*x)),
    "pe.skew_grad": (_one(lambda x, a, t: pg.skew_grad(
        x[0], a["dim"]))),
    "pe.sparse_skew_grad": (_one(lambda x, a, t: pg.sparse_skew_grad(
        x[0], a["dim"],
        a["support"]))),
    "pe.cayley_grad": (lambda x, a, t: pg.cayley_grad(*x)),
    "pe.generator_exp_grad": (_one(lambda x, a, t: pg.generator_exp_grad(*x))),
    "pe.apply_rotation_grad": (lambda x, a, t: pg.apply_rotation_grad(
        *x, heads=a["heads"])),
    "pe.commutator_norm_grad": (_one(lambda x, a, t: pg.commutator_norm_grad(*x))),
    "pe.spd_gate_grad": (lambda x, a, t: pg.spd_gate_grad(*x)),
    "pe.skip_gather_grad": (_one(lambda x, a, t: pg.skip_gather_grad(
        x[0], a["heads"],
        a["skip_base"]))),
    "pe.pair_gather_grad": (_one(lambda x, a, t: pg.pair_gather_grad(
        x[0], a["index"], _static(t[0], 0, "pe.pair_gather_grad")))),
    # Forward ops with a second result when asked for it (pe-autodiff): the
    # attention ops' log-sum-exp.
    "pe.attention": (_attention),
    "pe.rope_attention": (_rope_attention),
    # Hoisted and fused ops: pe.linear_gelu is a forward op with two results.
    "pe.linear_gelu": (lambda x, a, t: pt.linear_gelu(
        *x, approximate=a["approximate"])),
    "pe.rope_table_grad": (_one(lambda x, a, t: pg.rope_table_grad(*x))),
    "pe.rope_apply_grad_table": (_one(lambda x, a, t: pg.rope_apply_grad_table(
        *x, inverse=a["inverse"]))),
    "pe.cayley_weight_grad": (_one(lambda x, a, t: pg.cayley_weight_grad(*x))),
    "pe.rope_attention_grad": (lambda x, a, t: pg.rope_attention_grad(
        *x, heads=a["heads"],
        scale=a["scale"],
        mask=a["mask"])),
}


def _constant(op, dtype):
    """arith.constant with a dense tensor value (the autodiff seed, zeros)."""
    value = op.attributes.get("value")
    if not isinstance(value, torch.Tensor):
        raise InterpreterError(f"line {op.line}: arith.constant: unsupported value {value!r}")
    return value.to(dtype) if value.is_floating_point() else value


def _checked_attrs(op, args):
    """The op's attributes, its ODS defaults filled in, after checking its
    operand and result counts and required attributes against the schema
    generated from the dialect (op_schema.py)."""
    if op.name not in OP_SCHEMA:
        raise InterpreterError(f"line {op.line}: {op.name}: unsupported op")
    min_ops, max_ops, min_res, max_res, _types, attr_schema = OP_SCHEMA[op.name]
    if not min_ops <= len(args) <= max_ops:
        raise InterpreterError(f"line {op.line}: {op.name}: {len(args)} operands")
    follows = op.name in RESULTS_FOLLOW_OPERANDS and len(args) < max_ops
    want = min_res if follows else max_res
    if len(op.results) != want and not (op.name in SAVED_RESULT and len(op.results) == want - 1):
        raise InterpreterError(f"line {op.line}: {op.name}: {len(op.results)} results")
    attrs = dict(op.attributes)
    for name, (_kind, required, default, _keywords) in attr_schema.items():
        if name in attrs:
            continue
        if required:
            raise InterpreterError(f"line {op.line}: {op.name}: missing attribute {name}")
        if default is not None:
            attrs[name] = default
    return attrs


def _run(op, args, dtype, step_key):
    """The results of one op, as a list."""
    if op.name == "arith.constant":
        return [_constant(op, dtype)]
    if op.name == "pe.dropout":  # its mask is the step's
        attrs = _checked_attrs(op, args)
        return [pt.dropout(args[0], attrs["p"], attrs["stream"], attrs["per_sample"],
                           key=step_key)]
    if op.name == "pe.offset_table":  # its shape is its result type's
        ty = op.result_types[0]
        return [pt.offset_table(_req(op.attributes, "offsets", op.name),
                                _static(ty, 0, op.name), _static(ty, 1, op.name), dtype=dtype)]
    attrs = _checked_attrs(op, args)
    if op.name in OPS:
        return [OPS[op.name](args, attrs, dtype)]
    if op.name in GRAD_OPS:
        return list(GRAD_OPS[op.name](args, attrs, op.result_types))
    raise InterpreterError(f"line {op.line}: {op.name}: unsupported op")


# ---------------------------------------------------------- evaluation --

def _matches(t, ty):
    if not isinstance(ty, TensorType):
        return True
    if t.dim() != len(ty.shape):
        return False
    if any(d is not None and d != s for d, s in zip(ty.shape, t.shape)):
        return False
    return t.is_floating_point() == ty.element.startswith(("f", "bf"))


def _convert(t, ty, dtype, what):
    t = torch.as_tensor(t)
    if isinstance(ty, TensorType) and ty.element.startswith(("f", "bf")):
        t = t.to(dtype)
    if not _matches(t, ty):
        raise InterpreterError(f"{what}: got {t.dtype} {tuple(t.shape)}, expected {ty}")
    return t


def evaluate(module, params, inputs, dtype=torch.float32, function="forward",
             step_key=(0, 0, 0)):
    """Run `function` of `module` (a Module or generic-form text) on the
    parameter and input tensors; return OrderedDict {output name: tensor}.
    Float parameters and inputs are converted to `dtype`; gradients flow to
    the caller's tensors when they require grad and already have `dtype`.
    pe.dropout draws the masks of step_key = (seed, step, first sample)."""
    if not isinstance(module, Module):
        module = load_module(module)
    f = module.function(function)
    blocks = f.regions[0] if f.regions else []
    if len(blocks) != 1:
        raise InterpreterError(f"@{function} must have exactly one block")
    block = blocks[0]
    env = {}
    for (ssa, ty), (name, _) in zip(block.args, module.inputs(function)):
        if name not in inputs:
            raise InterpreterError(f"missing input {name!r}")
        env[ssa] = _convert(inputs[name], ty, dtype, f"input {name}")
    for op in block.ops:
        where = f"line {op.line}: {op.name}"
        if op.name == "func.return":
            values = [env[o] for o in op.operands]
            names = [n for n, _ in module.outputs(function)]
            return OrderedDict(zip(names, values))
        try:
            args = [env[o] for o in op.operands]
        except KeyError as e:
            raise InterpreterError(f"{where}: undefined value {e}") from None
        if op.name == "pe.get_param":
            name = op.attributes["param"]
            if name not in params:
                raise InterpreterError(f"{where}: missing parameter {name!r}")
            results = [_convert(params[name], op.result_types[0], dtype, f"{where} @{name}")]
        else:
            try:
                results = _run(op, args, dtype, step_key)
            except (ValueError, RuntimeError, IndexError) as e:
                raise InterpreterError(f"{where}: {e}") from e
        if len(results) != len(op.results):
            raise InterpreterError(f"{where}: computed {len(results)} results,"
                                   f" IR declares {len(op.results)}")
        for k, (result, ty) in enumerate(zip(results, op.result_types)):
            if not _matches(result, ty):
                raise InterpreterError(f"{where}: computed {result.dtype} {tuple(result.shape)}"
                                       f" for result {k}, IR declares {ty}")
        env.update(zip(op.results, results))
    raise InterpreterError(f"@{function} has no func.return")


def loss_and_grads(module, params, inputs, dtype=torch.float32, function="forward",
                   step_key=(0, 0, 0)):
    """(outputs, {name: d loss / d param}) for every trainable parameter; the
    loss is the first output."""
    if not isinstance(module, Module):
        module = load_module(module)
    leaves = {n: torch.as_tensor(t).detach().to(dtype).requires_grad_(
                  not module.parameters[n].frozen if n in module.parameters else False)
              for n, t in params.items()}
    outputs = evaluate(module, leaves, inputs, dtype, function, step_key)
    loss = next(iter(outputs.values()))
    if loss.dim() != 0:
        raise InterpreterError(f"the first output has shape {tuple(loss.shape)}, not a scalar loss")
    names = [n for n, t in leaves.items() if t.requires_grad]
    grads = [None] * len(names)
    if loss.requires_grad:
        grads = torch.autograd.grad(loss, [leaves[n] for n in names], allow_unused=True)
    return outputs, {n: torch.zeros_like(leaves[n]) if g is None else g
                     for n, g in zip(names, grads)}


def init_params(module, base_dir=".", dtype=torch.float32):
    """Parameters from their declared initializers. zeros, ones, constant and
    load are exact; normal and uniform draw from torch's generator seeded with
    `seed`, so they are distributed as declared but are not the values the
    compiled runtime draws."""
    if not isinstance(module, Module):
        module = load_module(module)
    out = {}
    for name, p in module.parameters.items():
        shape, a = p.type.shape, p.attributes
        if p.init == "zeros":
            t = torch.zeros(shape, dtype=torch.float64)
        elif p.init == "ones":
            t = torch.ones(shape, dtype=torch.float64)
        elif p.init == "constant":
            t = torch.full(shape, float(a["value"]), dtype=torch.float64)
        elif p.init in ("normal", "uniform"):
            g = torch.Generator().manual_seed(int(a.get("seed", 0)) & (2**63 - 1))
            t = torch.empty(shape, dtype=torch.float64)
            if p.init == "normal":
                t.normal_(float(a.get("mean", 0.0)), float(a.get("std", 1.0)), generator=g)
            else:
                t.uniform_(float(a.get("low", -1.0)), float(a.get("high", 1.0)), generator=g)
        elif p.init == "load":
            path = os.path.join(base_dir, a["file"])
            t = params_from_safetensors(path)[a["tensor"]]
        else:
            raise InterpreterError(f"parameter {name}: unknown init {p.init!r}")
        out[name] = _convert(t, p.type, dtype, f"parameter {name}")
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="pe module in MLIR generic form")
    ap.add_argument("--params", required=True, help="safetensors of the parameters")
    ap.add_argument("--inputs", required=True, help="safetensors of the model inputs")
    ap.add_argument("--out", required=True, help="safetensors to write")
    ap.add_argument("--function", default="forward",
                    help="the function to evaluate (default forward; e.g. gradients)")
    ap.add_argument("--grads", action="store_true",
                    help="also write grad.NAME, by autograd of the function's loss")
    ap.add_argument("--float64", action="store_true", help="evaluate in float64")
    args = ap.parse_args(argv)
    dtype = torch.float64 if args.float64 else torch.float32
    module = load_module(args.model)
    params = params_from_safetensors(args.params)
    inputs = params_from_safetensors(args.inputs)
    if args.grads:
        outputs, grads = loss_and_grads(module, params, inputs, dtype, args.function)
        outputs.update({f"grad.{n}": g for n, g in grads.items()})
    else:
        with torch.no_grad():
            outputs = evaluate(module, params, inputs, dtype, args.function)
    save_safetensors(args.out, {n: t.detach() for n, t in outputs.items()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
