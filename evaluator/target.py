"""A minimal host for one candidate, run under ncu or compute-sanitizer in its own process.

    python -m evaluator.target LIB M N K

- Inputs are copied from host memory: no kernel of ours runs besides the candidate's.
- The candidate is called twice inside an NVTX range named "hgemm".
- The exit code is 0 only when both calls return cudaSuccess and the device synchronises cleanly.
"""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    """M, N and K arrive as command-line integers and become a validated Shape here."""
    import numpy as np
    import torch
    from hgemm.evaluator.harness import WORKSPACE_BYTES, Candidate

    from hgemm.core.shape import Shape

    lib = argv[0]
    M, N, K = Shape(*map(int, argv[1:4]))
    rng = np.random.default_rng(0)
    a = torch.from_numpy(rng.standard_normal((M, K)).astype(np.float16)).cuda()
    b_host = rng.standard_normal((K, N)).astype(np.float16)
    b = torch.from_numpy(b_host).cuda()
    bt = torch.from_numpy(np.ascontiguousarray(b_host.T)).cuda()
    c = torch.empty(M, N, dtype=torch.float16, device="cuda")
    w = torch.empty(WORKSPACE_BYTES, dtype=torch.uint8, device="cuda")
    stream = torch.cuda.Stream()
    cand = Candidate(lib)
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push("hgemm")
    rcs = [cand.run(a.data_ptr(), b.data_ptr(), bt.data_ptr(), c.data_ptr(), M, N, K, w.data_ptr(),
                    WORKSPACE_BYTES, stream.cuda_stream) for _ in range(2)]
    torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    return 0 if all(rc == 0 for rc in rcs) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
