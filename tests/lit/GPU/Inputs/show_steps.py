"""Prints the step program of a stringc package of target cuda (docs/cuda.md,
"The step program"), one line per launch, for FileCheck:

  PROGRAM OP_INDEX OP_NAME scratch [SIZES]
  PROGRAM OP_INDEX OP_NAME: kernel NAME(ARGS) [grid X,Y,Z]
  PROGRAM OP_INDEX OP_NAME: gemm a=.. b=.. c=.. m=.. n=.. k=.. count=.. ... [epilogue=bias bias=..] [addend=..] [group=N]

  constant K TYPE COUNT: FIRST_VALUES...   (the package's constant arrays)

Sizes that depend on the batch print as `8B`, `8B+2`; others as numbers."""
import json
import struct
import sys

with open(sys.argv[1], "rb") as f:
    size = struct.unpack("<Q", f.read(8))[0]
    header = json.loads(f.read(size))
meta = header["__metadata__"]
cuda = json.loads(meta["cuda"])
programs = json.loads(meta["manifest"])["programs"]


def affine(pair):
    per, const = pair
    if per == 0:
        return str(const)
    text = "%dB" % per
    return text + ("+%d" % const if const else "")


def arg(a):
    (kind, value), = a.items()
    if kind in ("operand", "result", "scratch", "constant"):
        return "%s%d" % (kind, value)
    if kind == "i64":
        return affine(value)
    if kind in ("step_key", "group_table", "tickets"):
        return kind
    return "%g" % value


for program in ("forward", "gradients"):
    ops = programs[program]["ops"]
    for entry in cuda["steps"][program]:
        where = "%s %d %s" % (program, entry["op"], ops[entry["op"]]["op"])
        if entry["scratch"]:
            print(where, "scratch", ",".join(affine(s) for s in entry["scratch"]))
        for launch in entry["launches"]:
            if "gemm" in launch:
                g = launch["gemm"]
                print("%s: gemm a=%s b=%s c=%s m=%s n=%s k=%s count=%s trans_a=%d trans_b=%d "
                      "alpha=%g beta=%g" % (where, arg(g["a"]), arg(g["b"]), arg(g["c"]),
                                            affine(g["m"]), affine(g["n"]), affine(g["k"]),
                                            affine(g["count"]), g["trans_a"], g["trans_b"],
                                            g["alpha"], g["beta"]) +
                      (" epilogue=%s bias=%s" % (g["epilogue"], arg(g["bias"]))
                       if "epilogue" in g else "") +
                      (" addend=%s" % arg(g["addend"]) if "addend" in g else "") +
                      (" group=%d" % g["group"] if "group" in g else ""))
            else:
                grid = launch.get("grid")
                group = launch.get("group")
                print("%s: kernel %s(%s)%s%s" % (
                    where, launch["kernel"], ", ".join(arg(a) for a in launch["args"]),
                    " grid " + ",".join(affine(d) for d in grid) if grid else "",
                    " group=%d of (%s)" % (group["size"], ", ".join(arg(a) for a in group["args"]))
                    if group else ""))
for k, constant in enumerate(cuda["constants"]):
    values = constant["values"]
    print("constant %d %s %d: %s" % (k, constant["type"], len(values),
                                     " ".join("%g" % v for v in values[:12])))
