"""hgemm.bench: the maintained benchmark and check tools, each run as `python -m hgemm.bench.NAME`.

- Each tool's module docstring states its purpose, usage and invariants.
- Data a tool reads (`grid100.txt`, the probe and floor kernels' `.cu` sources) is package data, found with
  `importlib.resources`, so the tools work from an installed wheel as from the repository.
- Each benchmark's latest report lives in the repository's `bench/results/` (not installed); one-off
  experiments live in `experiments/`, never here.
"""
