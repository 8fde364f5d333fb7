"""The problem shape: C[M, N] = A[M, K] @ B[K, N], validated once where it enters.

- A `Shape` is frozen, hashable, ordered by (M, N, K) and always valid: positive integers, each at most
  `MAX_DIM`, and every operand below `MAX_ELEMENTS` elements (int32 indexing in kernels stays valid).
- It unpacks like the tuple it replaces (`M, N, K = shape`) and prints as `MxNxK`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hgemm.core.errors import BadInput

MAX_DIM = 65536  # the grid's largest size is 16384; allow headroom, refuse the absurd
MAX_ELEMENTS = 1 << 31  # per operand


@dataclass(frozen=True, order=True)
class Shape:
    M: int
    N: int
    K: int

    def __post_init__(self) -> None:
        for name in ("M", "N", "K"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool):
                raise BadInput(f"{name} must be an integer, got {v!r}")
            if v <= 0:
                raise BadInput(f"{name} must be positive, got {v}")
            if v > MAX_DIM:
                raise BadInput(f"{name}={v} is larger than {MAX_DIM}")
        for name, count in (("A (M*K)", self.M * self.K), ("B (K*N)", self.K * self.N), ("C (M*N)", self.M * self.N)):
            if count >= MAX_ELEMENTS:
                raise BadInput(f"{name} has {count} elements; at most {MAX_ELEMENTS - 1} are supported")

    @classmethod
    def of(cls, value: Shape | tuple[int, int, int] | str) -> Shape:
        """A Shape from a Shape, an (M, N, K) triple or text such as `1024x512x4096` or `1024 512 4096`."""
        if isinstance(value, Shape):
            return value
        if isinstance(value, str):
            parts = [p for p in re.split(r"[x×,\s]+", value.strip()) if p]
            if len(parts) != 3 or not all(re.fullmatch(r"[+-]?\d+", p) for p in parts):
                raise BadInput(f"a shape is three integers M N K (or MxNxK), got {value!r}")
            return cls(*(int(p) for p in parts))
        try:
            M, N, K = value
        except (TypeError, ValueError):
            raise BadInput(f"a shape is three integers M N K, got {value!r}") from None
        return cls(M, N, K)

    def __iter__(self):
        return iter((self.M, self.N, self.K))

    def __str__(self) -> str:
        return f"{self.M}x{self.N}x{self.K}"

    @property
    def flops(self) -> int:
        """2·M·N·K: the multiply-adds of the product, counted as two operations each."""
        return 2 * self.M * self.N * self.K
