"""Probe: cost of cuInit vs context creation in fresh processes, alone and two at once, and whether a
process doing cuInit (or cuInit + context) disturbs event timings of kernels on the same GPU."""
import ctypes as c, json, os, subprocess, sys, time, statistics as st

CHILD = r'''
import ctypes as c, time, json, sys
t0=time.perf_counter(); cu=c.CDLL("libcuda.so.1"); rt=c.CDLL(sys.argv[1]); t1=time.perf_counter()
r=cu.cuInit(0); t2=time.perf_counter()
if sys.argv[2]=="ctx":
    r2=rt.cudaFree(c.c_void_p(0))
else:
    r2=0
t3=time.perf_counter()
print(json.dumps({"load":t1-t0,"init":t2-t1,"ctx":t3-t2,"rc":[r,r2]}))
'''

def cudart():
    import glob
    for p in sys.path:
        g = sorted(glob.glob(os.path.join(p, "nvidia", "cuda_runtime", "lib", "libcudart.so*")))
        if g: return g[0]
    return "libcudart.so"

def child(kind, dev):
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=str(dev))
    out = subprocess.run([sys.executable, "-c", CHILD, cudart(), kind], env=env, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])

def series(kind, dev, n):
    return [child(kind, dev) for _ in range(n)]

def summ(rs):
    return {k: round(st.median(r[k] for r in rs) * 1000, 1) for k in ("load", "init", "ctx")}

if __name__ == "__main__":
    what = sys.argv[1]
    if what == "cost":
        n = int(sys.argv[2]); ndev = int(sys.argv[3])
        res = {"alone_ctx": summ(series("ctx", 0, n)), "alone_init": summ(series("init", 0, n))}
        if ndev > 1:
            from concurrent.futures import ThreadPoolExecutor
            with ThreadPoolExecutor(2) as ex:
                fs = [ex.submit(series, "ctx", d, n) for d in (0, 1)]
                rs = [f.result() for f in fs]
            res["two_gpus_ctx"] = [summ(r) for r in rs]
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(2) as ex:
            fs = [ex.submit(series, "ctx", 0, n) for _ in (0, 1)]
            res["same_gpu_two_ctx"] = [summ(f.result()) for f in fs]
        print(json.dumps(res))
    elif what == "bg":  # background loop of fresh processes until killed
        kind = sys.argv[2]
        while True:
            child(kind, 0)
    elif what == "time":  # event timings of a short and a mid GEMM, in graphs
        import torch
        out = {}
        for (M, N, K) in [(4096, 4096, 128), (1024, 1024, 1024), (256, 256, 256)]:
            a = torch.randn(M, K, device="cuda", dtype=torch.half); b = torch.randn(K, N, device="cuda", dtype=torch.half)
            cc = torch.empty(M, N, device="cuda", dtype=torch.half)
            s = torch.cuda.Stream()
            with torch.cuda.stream(s):
                for _ in range(3): torch.mm(a, b, out=cc)
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g, stream=s):
                    for _ in range(10): torch.mm(a, b, out=cc)
            ts = []
            t_end = time.time() + float(sys.argv[2])
            while time.time() < t_end:
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record(s); g.replay(); e1.record(s); e1.synchronize(); ts.append(e0.elapsed_time(e1) * 100)
            ts.sort()
            out[f"{M}x{N}x{K}"] = {"n": len(ts), "p10": round(ts[len(ts)//10], 3), "p50": round(ts[len(ts)//2], 3),
                                   "p90": round(ts[9*len(ts)//10], 3), "p99": round(ts[99*len(ts)//100], 3), "max": round(ts[-1], 3)}
        print(json.dumps(out))


def interleaved(kind: str, pairs: int, window: float) -> dict:
    """Alternate windows with the background spawner running (ON) and stopped (OFF), ABBA order; per window
    the median event time of each shape's graph; paired ON/OFF ratios."""
    import signal, torch
    bg = subprocess.Popen([sys.executable, __file__, "bg", kind])
    time.sleep(2.0)
    setups = {}
    s = torch.cuda.Stream()
    for (M, N, K) in [(4096, 4096, 128), (256, 256, 256), (1024, 1024, 1024)]:
        a = torch.randn(M, K, device="cuda", dtype=torch.half); b = torch.randn(K, N, device="cuda", dtype=torch.half)
        cc = torch.empty(M, N, device="cuda", dtype=torch.half)
        with torch.cuda.stream(s):
            for _ in range(3): torch.mm(a, b, out=cc)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, stream=s):
                for _ in range(10): torch.mm(a, b, out=cc)
        setups[f"{M}x{N}x{K}"] = (g, a, b, cc)
    res = {name: {"on": [], "off": []} for name in setups}
    order = []
    for p in range(pairs):
        order += ["on", "off"] if p % 2 == 0 else ["off", "on"]
    for state in order:
        os.kill(bg.pid, signal.SIGCONT if state == "on" else signal.SIGSTOP)
        time.sleep(0.4)
        for name, (g, *_ ) in setups.items():
            ts = []
            t_end = time.time() + window
            while time.time() < t_end:
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record(s); g.replay(); e1.record(s); e1.synchronize(); ts.append(e0.elapsed_time(e1) * 100)
            ts.sort()
            res[name][state].append((ts[len(ts) // 2], ts[9 * len(ts) // 10], ts[99 * len(ts) // 100]))
    os.kill(bg.pid, signal.SIGCONT); bg.kill()
    out = {}
    for name, r in res.items():
        on50 = st.median(x[0] for x in r["on"]); off50 = st.median(x[0] for x in r["off"])
        ratios = sorted(a[0] / b[0] for a, b in zip(r["on"], r["off"]))
        out[name] = {"on_p50": round(on50, 3), "off_p50": round(off50, 3), "ratio_p50": round(on50 / off50, 4),
                     "pair_ratios": [round(x, 3) for x in ratios],
                     "on_p99": round(st.median(x[2] for x in r["on"]), 3), "off_p99": round(st.median(x[2] for x in r["off"]), 3)}
    return out


if __name__ == "__main__" and sys.argv[1] == "interleaved":
    print(json.dumps({"kind": sys.argv[2], **interleaved(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))}))
