"""hgemm: search for half-precision GEMM kernels that beat cuBLAS, with a ranked archive of every attempt.

One installed namespace. The repository's top-level folders are its rooms, installed beneath it:
`hgemm.agent` (agent/), `hgemm.evaluator` (evaluator/), `hgemm.archive` (archive/), `hgemm.index` (index/),
`hgemm.prompts` (prompts/) and `hgemm.bench` (bench/); `hgemm.core` (hgemm/core/) is the vocabulary they share.
"""

__version__ = "0.11.0"
