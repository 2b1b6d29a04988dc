"""Parser for MLIR's generic operation form (`--mlir-print-op-generic`).

Reads the subset stringc prints: ops `%r = "dialect.op"(%a, %b) <{props}>
({regions}) {attrs} : (types) -> types`, regions of blocks with `^bb0(...)`
labels, and the builtin attribute and type syntax. Attribute values become
Python values:

  17 : i64 -> int          2.0e-02 : f64, 0x3F800000 : f32 -> float
  true / false -> bool     a unit attribute (bare name in a dict) -> True
  "text" -> str            @sym, @a::@b -> SymbolRef (a str subclass)
  [a, b] -> list           {k = v} -> dict       array<i64: 1, 2> -> list
  tensor<?x4xf32>, i32, (..) -> (..) -> TensorType / ScalarType / FunctionType
  dense<...> : tensor<..> -> torch.Tensor
  #pe<mask causal>, #pe.mask<causal> -> "causal" (the last identifier)

Other dialect attributes and unknown forms become their raw text. Locations
(`loc(...)`) and `//` comments are skipped; `#alias = ...` and `!alias =
...` definitions are resolved.
"""

import re
import struct
from dataclasses import dataclass, field

import torch


class ParseError(Exception):
    """A syntax error, with the line it was found on."""


class SymbolRef(str):
    """A symbol reference `@name` (nested references joined with `::`)."""


@dataclass(frozen=True)
class TensorType:
    """A ranked tensor type; dynamic dimensions are None."""
    shape: tuple
    element: str

    def __str__(self):
        dims = "".join(("?" if d is None else str(d)) + "x" for d in self.shape)
        return f"tensor<{dims}{self.element}>"


@dataclass(frozen=True)
class ScalarType:
    """A builtin non-tensor type such as f32, i64 or index."""
    name: str

    def __str__(self):
        return self.name


@dataclass(frozen=True)
class FunctionType:
    """A function type (inputs) -> (results)."""
    inputs: tuple
    results: tuple


@dataclass
class Block:
    """A block: its arguments [(ssa name, type)] and its ops."""
    args: list
    ops: list


@dataclass
class Op:
    """One operation. `attributes` merges properties `<{...}>` and the
    discardable attribute dictionary `{...}`."""
    name: str
    results: list
    operands: list
    attributes: dict
    regions: list
    operand_types: tuple
    result_types: tuple
    line: int = 0
    successors: list = field(default_factory=list)


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_$.]*")
_NUMBER = re.compile(r"[-+]?(0x[0-9a-fA-F]+|[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?)")
_SSA = re.compile(r"%[A-Za-z0-9_$.\-]+(#[0-9]+)?")
_SUCC = re.compile(r"\^[A-Za-z0-9_$.\-]+")
_SHAPE = re.compile(r"^((?:(?:[0-9]+|\?)x)*)(.+)$")
_FLOAT_BITS = {"f16": ("<e", "<H"), "f32": ("<f", "<I"), "f64": ("<d", "<Q")}
_DENSE_DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32,
                 "f64": torch.float64, "i1": torch.bool, "i8": torch.int8,
                 "i16": torch.int16, "i32": torch.int32, "i64": torch.int64,
                 "index": torch.int64}


def _is_float_type(t):
    return isinstance(t, ScalarType) and (t.name.startswith("f") or t.name == "bf16")


class _Parser:
    def __init__(self, text):
        self.s = text
        self.i = 0
        self.attr_aliases = {}
        self.type_aliases = {}

    # ------------------------------------------------------------ lexing --
    def line(self):
        return self.s.count("\n", 0, self.i) + 1

    def error(self, msg):
        near = self.s[self.i:self.i + 40].split("\n")[0]
        raise ParseError(f"line {self.line()}: {msg} (at {near!r})")

    def ws(self):
        while self.i < len(self.s):
            c = self.s[self.i]
            if c.isspace():
                self.i += 1
            elif self.s.startswith("//", self.i):
                end = self.s.find("\n", self.i)
                self.i = len(self.s) if end < 0 else end
            else:
                break

    def peek(self, tok):
        self.ws()
        return self.s.startswith(tok, self.i)

    def accept(self, tok):
        if self.peek(tok):
            self.i += len(tok)
            return True
        return False

    def expect(self, tok):
        if not self.accept(tok):
            self.error(f"expected {tok!r}")

    def regex(self, pattern, what):
        self.ws()
        m = pattern.match(self.s, self.i)
        if not m:
            self.error(f"expected {what}")
        self.i = m.end()
        return m.group(0)

    def at_end(self):
        self.ws()
        return self.i >= len(self.s)

    def string(self):
        self.ws()
        if not self.s.startswith('"', self.i):
            self.error("expected a string")
        out, j = bytearray(), self.i + 1
        while j < len(self.s) and self.s[j] != '"':
            c = self.s[j]
            if c == "\\":
                nxt = self.s[j + 1]
                if nxt in '"\\':
                    out += nxt.encode()
                    j += 2
                elif nxt == "n":
                    out += b"\n"
                    j += 2
                elif nxt == "t":
                    out += b"\t"
                    j += 2
                else:
                    out.append(int(self.s[j + 1:j + 3], 16))
                    j += 3
            else:
                out += c.encode("utf-8")
                j += 1
        if j >= len(self.s):
            self.error("unterminated string")
        self.i = j + 1
        return out.decode("utf-8", errors="surrogateescape")

    def balanced(self):
        """Raw text of a `<...>`, `(...)`, `[...]` or `{...}` group, brackets
        included; strings and `->` are skipped over."""
        self.ws()
        pairs = {"<": ">", "(": ")", "[": "]", "{": "}"}
        start, depth, j = self.i, [], self.i
        while j < len(self.s):
            c = self.s[j]
            if c == '"':
                self.i = j
                self.string()
                j = self.i
                continue
            if c == "-" and self.s.startswith("->", j):
                j += 2
                continue
            if c in pairs:
                depth.append(pairs[c])
            elif depth and c == depth[-1]:
                depth.pop()
                if not depth:
                    self.i = j + 1
                    return self.s[start:self.i]
            j += 1
        self.i = start
        self.error("unbalanced brackets")

    def skip_loc(self):
        while self.peek("loc("):
            self.i += 3
            self.balanced()

    # ------------------------------------------------------------- types --
    def type(self):
        self.ws()
        if self.peek("("):
            return self.function_type()
        if self.peek("!"):
            name = self.regex(re.compile(r"![A-Za-z0-9_$.]+"), "a type")
            if name[1:] in self.type_aliases:
                return self.type_aliases[name[1:]]
            if self.peek("<"):
                name += self.balanced()
            return ScalarType(name)
        name = self.regex(_IDENT, "a type")
        if name in ("tensor", "vector", "memref", "complex") or self.peek("<"):
            body = self.balanced()[1:-1]
            if name != "tensor":
                return ScalarType(f"{name}<{body}>")
            body = body.split(",")[0].strip()
            m = _SHAPE.match(body)
            dims = [d for d in m.group(1).split("x") if d]
            shape = tuple(None if d == "?" else int(d) for d in dims)
            return TensorType(shape, m.group(2).strip())
        return ScalarType(name)

    def type_list(self):
        """`(t, ...)` or a single type."""
        if self.accept("("):
            out = []
            if not self.accept(")"):
                out.append(self.type())
                while self.accept(","):
                    out.append(self.type())
                self.expect(")")
            return tuple(out)
        return (self.type(),)

    def function_type(self):
        inputs = self.type_list()
        self.expect("->")
        return FunctionType(inputs, self.type_list())

    # -------------------------------------------------------- attributes --
    def attr_dict(self):
        """`{key = value, unit_key, "quoted key" = value}` -> dict."""
        self.expect("{")
        out = {}
        if self.accept("}"):
            return out
        while True:
            key = self.string() if self.peek('"') else self.regex(_IDENT, "a key")
            out[key] = self.attr() if self.accept("=") else True
            if self.accept("}"):
                return out
            self.expect(",")

    def typed_number(self, text):
        ty = self.type() if self.accept(":") else None
        if text.lstrip("+-").startswith("0x"):
            bits = int(text, 16)
            if _is_float_type(ty) and ty.name in _FLOAT_BITS:
                ffmt, ifmt = _FLOAT_BITS[ty.name]
                return struct.unpack(ffmt, struct.pack(ifmt, bits))[0]
            return bits
        if _is_float_type(ty) or re.search(r"[.eE]", text):
            return float(text)
        return int(text)

    def attr(self):
        self.ws()
        c = self.s[self.i:self.i + 1]
        if c == '"':
            return self.string()
        if c == "@":
            parts = [self.regex(re.compile(r"@([A-Za-z0-9_$.\-]+|\"[^\"]*\")"), "a symbol")]
            while self.peek("::@"):
                self.i += 2
                parts.append(self.regex(re.compile(r"@[A-Za-z0-9_$.\-]+"), "a symbol"))
            return SymbolRef("::".join(p[1:].strip('"') for p in parts))
        if c == "[":
            self.i += 1
            out = []
            if not self.accept("]"):
                out.append(self.attr())
                while self.accept(","):
                    out.append(self.attr())
                self.expect("]")
            return out
        if c == "{":
            return self.attr_dict()
        if c == "#":
            return self.hash_attr()
        if _NUMBER.match(self.s, self.i):
            return self.typed_number(self.regex(_NUMBER, "a number"))
        if self.s.startswith(("array<", "dense<", "true", "false", "unit"), self.i):
            word = self.regex(_IDENT, "a keyword")
            if word in ("true", "false"):
                if self.accept(":"):
                    self.type()
                return word == "true"
            if word == "unit":
                return True
            if word == "array":
                return self.array_body()
            if word == "dense":
                return self.dense_body()
        return self.type()

    def hash_attr(self):
        name = self.regex(re.compile(r"#[A-Za-z0-9_$.\-]+"), "an attribute")
        if not self.peek("<"):
            if name[1:] in self.attr_aliases:
                return self.attr_aliases[name[1:]]
            return name
        body = self.balanced()[1:-1]
        words = re.findall(r"[A-Za-z_][A-Za-z0-9_]*", body)
        return words[-1] if words else name + "<" + body + ">"

    def array_body(self):
        """`array<i64: 1, 2>` (after `array`) -> list of numbers."""
        self.expect("<")
        ty = self.type()
        out = []
        if self.accept(":"):
            while True:
                text = self.regex(re.compile(r"[-+]?[0-9A-Za-z.+\-]+"), "a number")
                if text in ("true", "false"):
                    out.append(text == "true")
                elif _is_float_type(ty):
                    out.append(float(text))
                else:
                    out.append(int(text, 0))
                if not self.accept(","):
                    break
        self.expect(">")
        return out

    def dense_body(self):
        """`dense<literal> : tensor<...>` (after `dense`) -> torch.Tensor."""
        self.expect("<")
        if self.peek('"'):
            literal = bytes.fromhex(self.string()[2:])
        elif self.peek(">"):
            literal = []
        else:
            literal = self.attr()
        self.expect(">")
        self.expect(":")
        ty = self.type()
        dtype = _DENSE_DTYPES[ty.element]
        if isinstance(literal, bytes):
            t = torch.frombuffer(bytearray(literal), dtype=dtype).clone()
            t = t.reshape(()) if t.numel() == 1 else t
        else:
            t = torch.tensor(literal, dtype=dtype)
        return t.expand(ty.shape).clone() if t.dim() == 0 else t.reshape(ty.shape)

    # ---------------------------------------------------------------- ops --
    def operation(self):
        line = self.line()
        results = []
        if self.peek("%"):
            while True:
                name = self.regex(re.compile(r"%[A-Za-z0-9_$.\-]+"), "a result")
                n = int(self.regex(re.compile(r":[0-9]+"), "")[1:]) if self.peek(":") else 1
                results += [name] if n == 1 else [f"{name}#{k}" for k in range(n)]
                if not self.accept(","):
                    break
            self.expect("=")
        if not self.peek('"'):
            self.error("expected a generic op (\"dialect.name\"); print with --mlir-print-op-generic")
        name = self.string()
        self.expect("(")
        operands = []
        if not self.accept(")"):
            operands.append(self.regex(_SSA, "an operand"))
            while self.accept(","):
                operands.append(self.regex(_SSA, "an operand"))
            self.expect(")")
        successors = []
        if self.accept("["):
            successors.append(self.regex(_SUCC, "a successor"))
            while self.accept(","):
                successors.append(self.regex(_SUCC, "a successor"))
            self.expect("]")
        attrs = {}
        if self.accept("<"):
            attrs.update(self.attr_dict())
            self.expect(">")
        regions = []
        if self.peek("(") and self.s.startswith("{", self._after_ws(self.i + 1)):
            self.expect("(")
            regions.append(self.region())
            while self.accept(","):
                regions.append(self.region())
            self.expect(")")
        if self.peek("{"):
            attrs.update(self.attr_dict())
        self.expect(":")
        ftype = self.function_type()
        self.skip_loc()
        if len(ftype.results) != len(results):
            self.error(f"{name}: {len(results)} results but {len(ftype.results)} result types")
        return Op(name, results, operands, attrs, regions, ftype.inputs,
                  ftype.results, line, successors)

    def _after_ws(self, j):
        while j < len(self.s) and self.s[j].isspace():
            j += 1
        return j

    def region(self):
        self.expect("{")
        blocks = []
        while not self.accept("}"):
            if self.peek("^"):
                self.regex(_SUCC, "a block label")
                args = []
                if self.accept("("):
                    while not self.accept(")"):
                        arg = self.regex(_SSA, "a block argument")
                        self.expect(":")
                        args.append((arg, self.type()))
                        self.skip_loc()
                        self.accept(",")
                self.expect(":")
                blocks.append(Block(args, []))
                continue
            if not blocks:
                blocks.append(Block([], []))
            blocks[-1].ops.append(self.operation())
        return blocks

    def module(self):
        ops = []
        while not self.at_end():
            if self.peek("#") or self.peek("!"):
                sigil = self.s[self.i]
                name = self.regex(re.compile(r"[#!][A-Za-z0-9_$.\-]+"), "an alias")[1:]
                self.expect("=")
                if self.peek("loc("):
                    self.skip_loc()
                elif sigil == "#":
                    self.attr_aliases[name] = self.attr()
                else:
                    self.type_aliases[name] = self.type()
                continue
            if self.peek("{-#"):                     # dialect resources
                end = self.s.find("#-}", self.i)
                self.i = len(self.s) if end < 0 else end + 3
                continue
            ops.append(self.operation())
        return ops


def parse(text):
    """Parse generic-form MLIR text into its top-level ops (a list of Op)."""
    return _Parser(text).module()


def parse_attribute(text):
    """Parse one attribute value (used by tests)."""
    p = _Parser(text)
    value = p.attr()
    if not p.at_end():
        p.error("trailing text after the attribute")
    return value


def walk(ops):
    """Every op of `ops` and of their regions, in textual order."""
    for op in ops:
        yield op
        for region in op.regions:
            for block in region:
                yield from walk(block.ops)
