"""What each contender's captured graph holds: node types, kernel names, grids, launch attributes, edges.

The timing module captures every contender (our kernel and the four baselines) in a CUDA graph and
replays it. This lists, per shape and contender, the graph of two back-to-back calls as the driver
sees it (libcuda through ctypes): each node's type; for kernel nodes the function name, grid, block,
dynamic shared memory, cluster dimensions and the other launch attributes the driver reports (raw
bytes of the attribute value, or `rcN` where the query returns error N), and the function's
registers and shared-memory limits; and the edges with their type (0 default, 1 programmatic: a
programmatic dependent launch). A GPU tool; our kernels are the report's, re-rendered from the archive.

Usage: python experiments/2026-11-22-h100-server-mode/graph_nodes.py REPORT.json ARCHIVE.jsonl.xz
       --shapes 512x8192x512,64x64x64 [--out graph-nodes.json]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import sys
from pathlib import Path

NODE_TYPES = {0: "kernel", 1: "memcpy", 2: "memset", 3: "host", 4: "graph", 5: "empty", 6: "wait_event",
              7: "event_record", 10: "mem_alloc", 11: "mem_free", 12: "batch_mem_op", 13: "conditional"}  # fmt: skip
LAUNCH_ATTRIBUTES = ((3, "sync_policy"), (4, "cluster"), (5, "cluster_sched"), (6, "prog_serialization"),
                     (7, "prog_event"), (8, "priority"), (9, "memsync_map"), (10, "memsync_domain"), (12, "completion_event"))  # fmt: skip
FUNC_ATTRIBUTES = ((4, "regs"), (1, "static_smem"), (8, "max_dyn_smem"), (9, "carveout"), (0, "max_threads"))


class KernelParams(ctypes.Structure):  # CUDA_KERNEL_NODE_PARAMS_v2
    _fields_ = [("func", ctypes.c_void_p), ("gx", ctypes.c_uint), ("gy", ctypes.c_uint), ("gz", ctypes.c_uint),
                ("bx", ctypes.c_uint), ("by", ctypes.c_uint), ("bz", ctypes.c_uint), ("smem", ctypes.c_uint),
                ("params", ctypes.c_void_p), ("extra", ctypes.c_void_p), ("kern", ctypes.c_void_p),
                ("ctx", ctypes.c_void_p)]  # fmt: skip


class EdgeData(ctypes.Structure):  # CUgraphEdgeData
    _fields_ = [("from_port", ctypes.c_ubyte), ("to_port", ctypes.c_ubyte), ("type", ctypes.c_ubyte),
                ("reserved", ctypes.c_ubyte * 5)]  # fmt: skip


def describe(cu, graph: int) -> dict:
    """Nodes and edges of a CUgraph handle."""
    g = ctypes.c_void_p(graph)
    n = ctypes.c_size_t(0)
    if cu.cuGraphGetNodes(g, None, ctypes.byref(n)) != 0:
        raise RuntimeError("cuGraphGetNodes failed")
    handles = (ctypes.c_void_p * n.value)()
    cu.cuGraphGetNodes(g, handles, ctypes.byref(n))
    nodes = []
    for h in handles:
        node = ctypes.c_void_p(h)
        t = ctypes.c_int(-1)
        cu.cuGraphNodeGetType(node, ctypes.byref(t))
        entry: dict = {"type": NODE_TYPES.get(t.value, t.value)}
        if t.value == 0:
            kp = KernelParams()
            entry["rc"] = cu.cuGraphKernelNodeGetParams_v2(node, ctypes.byref(kp))
            name = ctypes.c_char_p()
            if kp.func:
                cu.cuFuncGetName(ctypes.byref(name), ctypes.c_void_p(kp.func))
            elif kp.kern:
                cu.cuKernelGetName(ctypes.byref(name), ctypes.c_void_p(kp.kern))
            entry.update(name=(name.value or b"?").decode()[:80], grid=[kp.gx, kp.gy, kp.gz],
                         block=[kp.bx, kp.by, kp.bz], smem=kp.smem)  # fmt: skip
            for aid, label in LAUNCH_ATTRIBUTES:
                value = (ctypes.c_ubyte * 64)()
                rc = cu.cuGraphKernelNodeGetAttribute(node, aid, value)
                entry[label] = list(value[:12]) if rc == 0 else f"rc{rc}"
            if kp.func:
                func = {}
                for aid, label in FUNC_ATTRIBUTES:
                    v = ctypes.c_int(-1)
                    cu.cuFuncGetAttribute(ctypes.byref(v), aid, ctypes.c_void_p(kp.func))
                    func[label] = v.value
                entry["func"] = func
        nodes.append(entry)
    m = ctypes.c_size_t(0)
    cu.cuGraphGetEdges_v2(g, None, None, None, ctypes.byref(m))
    edges = []
    if m.value:
        src, dst = (ctypes.c_void_p * m.value)(), (ctypes.c_void_p * m.value)()
        data = (EdgeData * m.value)()
        cu.cuGraphGetEdges_v2(g, src, dst, data, ctypes.byref(m))
        edges = [{"from_port": d.from_port, "to_port": d.to_port, "type": d.type} for d in data]
    return {"nodes": nodes, "edges": edges}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report", type=Path)
    ap.add_argument("archive", type=Path)
    ap.add_argument("--shapes", required=True, help="MxNxK,... (rows of the report)")
    ap.add_argument("--out", type=Path, default=Path("graph-nodes.json"))
    args = ap.parse_args(argv)
    try:
        shapes = [tuple(int(x) for x in s.split("x", 2)) for s in args.shapes.split(",")]
    except ValueError:
        ap.error(f"--shapes: expected MxNxK,..., got {args.shapes!r}")
    rows = {(r["M"], r["N"], r["K"]): r for r in json.loads(args.report.read_text())["rows"]}
    missing = [s for s in shapes if not rows.get(s, {}).get("kernel")]
    if missing:
        ap.error(f"no kernel in the report for {missing}")

    import torch
    from hgemm.bench.server_probe import kernel_params
    from hgemm.evaluator import gpu_facts
    from hgemm.evaluator.baselines import Baselines
    from hgemm.evaluator.compile import compile_sources
    from hgemm.evaluator.harness import Candidate, Problem
    from hgemm.evaluator.kernels import get_family

    cu = ctypes.CDLL("libcuda.so.1")
    params = kernel_params(args.archive, {rows[s]["kernel"] for s in shapes})
    info = gpu_facts.gpu_info()
    result = {"gpu": info.name, "driver": info.driver, "graphs": {}}
    for s in shapes:
        family, p = params[rows[s]["kernel"]]
        (built,) = compile_sources([get_family(family).render(p)])
        prob = Problem(*s)
        prob.draw("randn")
        base = Baselines(prob.a, prob.b, prob.bt, *s, gpu_facts.gpu_key(info), prob.stream, info.l2_bytes)
        cand = Candidate(built.lib_path)
        contenders = dict(base.contenders)
        contenders["ours"] = lambda cand=cand, prob=prob: prob.launch(cand)
        for name, fn in contenders.items():
            with torch.cuda.stream(prob.stream):
                fn()
            prob.stream.synchronize()
            graph = torch.cuda.CUDAGraph(keep_graph=True)
            with torch.cuda.graph(graph, stream=prob.stream):
                fn()
                fn()
            d = describe(cu, graph.raw_cuda_graph())
            result["graphs"][f"{s[0]}x{s[1]}x{s[2]} {name}"] = d
            print(f"{s} {name}: " + ", ".join(f"{x['type']} {x.get('name', '')}" for x in d["nodes"])
                  + f"; edge types {[e['type'] for e in d['edges']]}", flush=True)  # fmt: skip
        args.out.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
