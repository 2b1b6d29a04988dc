"""Prints a stringc package of target cuda as lines FileCheck can match:
the target, the arch, the precision, each kernel (op, params, grid rule, block, dynamic shared memory, uses), each
tensor (dtype and what its bytes start with) and the coverage."""
import json
import struct
import sys

with open(sys.argv[1], "rb") as f:
    size = struct.unpack("<Q", f.read(8))[0]
    header = json.loads(f.read(size))
    data = f.read()
meta = header.pop("__metadata__")
print("target", meta["target"])
cuda = json.loads(meta["cuda"])
print("arch", cuda["arch"])
print("precision", cuda["precision"])
for k in cuda["kernels"]:
    uses = ",".join("%s:%d" % (u["program"], u["op"]) for u in k["uses"])
    shared = " dynamic_shared %d" % k["dynamic_shared"] if "dynamic_shared" in k else ""
    print("kernel %s op %s params %s grid %s block %dx%d%s uses %s" % (
        k["name"], k["op"], ",".join(k["params"]), k["grid"], k["block"][0], k["block"][1], shared,
        uses))
for name in sorted(header, key=lambda n: (n.split(".", 1)[1], n)):
    info = header[name]
    begin, end = info["data_offsets"]
    blob = data[begin:end]
    if blob[:4] == b"\x7fELF":
        what = "elf"
    else:
        target = [line for line in blob.decode().splitlines() if line.startswith(".target")]
        what = "ptx " + (target[0] if target else "?")
    print("tensor %s %s %s" % (name, info["dtype"], what))
cov = cuda["coverage"]
print("coverage %d of %d ops; %s" % (cov["with_kernel"], cov["ops"], "; ".join(
    "%s without: %s" % (p, ",".join(names)) for p, names in cov["without_kernel"].items())))
