"""The vocabulary every room shares: the problem shape, evaluation records, modes and baseline names,
the error base class and the state root. It imports nothing else of hgemm."""

from hgemm.core.errors import BadInput, HgemmError, NoCompiler, NoGpu
from hgemm.core.paths import state_dir, state_root
from hgemm.core.record import BASELINES, FAILURE_KINDS, MODES, NOT_DEFECTS, EvalRecord, GpuInfo
from hgemm.core.shape import Shape

__all__ = [
    "BASELINES", "FAILURE_KINDS", "MODES", "NOT_DEFECTS", "BadInput", "EvalRecord", "GpuInfo", "HgemmError",
    "NoCompiler", "NoGpu", "Shape", "state_dir", "state_root",
]
