"""The Hopper "wgmma" family on a real GPU: every bench configuration is correct on two small shapes.

Uses the standalone harness of hgemm.bench.check_wgmma (nvcc -> ctypes, torch fp32 reference, NaN-filled
output so unwritten elements fail). Skipped without a GPU; skipped on a GPU that is not compute
capability 9.x, where the family's hgemm_supports must say 0.
"""

from __future__ import annotations

import pytest
from hgemm.bench import check_wgmma

from hgemm.core.shape import Shape

pytestmark = [pytest.mark.gpu, pytest.mark.slow]


def test_all_configs_correct_on_small_shapes():
    import torch

    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("wgmma kernels need a compute capability 9.x GPU")
    # 2048 x 4096 x 512: 256+ tiles, so persistent CTAs take several and the ring wraps across
    # tiles; 256 x 1024 x 64: a single k-block per tile; 1024 x 512 x 2048: fewer tiles than SMs, so
    # stream-K spreads each tile over several CTAs that hand partials to the tile's first.
    rows = check_wgmma.run_raw([(2048, 4096, 512), (256, 1024, 64), (1024, 512, 2048)])
    ran = [r for r in rows if r["status"] != "skip"]
    assert len(ran) >= len(check_wgmma.CONFIGS), rows
    bad = [
        (r["config"], r["M"], r["N"], r["K"], r["status"], r["message"]) for r in ran if r["status"] != "ok"
    ]
    assert not bad, bad


def test_paired_cluster_defaults_correct_with_a_partial_last_row_of_tiles():
    """The default's 2x1 clusters of 128-row tiles where M is not a multiple of 256 (1000 rows: eight tiles, the
    last one 104 rows; 744: six, the last 104), with 128x160, 128x128 and 128x256 tiles."""
    import torch

    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("wgmma kernels need a compute capability 9.x GPU")
    shapes = [(1000, 4608, 512), (1000, 2048, 1024), (744, 4608, 256)]  # 128x128 pairs only with K > 512
    defaults = [check_wgmma.FAMILY.default_params(Shape(*s)) for s in shapes]
    assert [(p["bn"], p["cluster_m"]) for p in defaults] == [(160, 2), (128, 2), (256, 2)]
    rows = check_wgmma.run_raw(shapes, names=[])
    assert [(r["config"], r["status"]) for r in rows] == [("default", "ok")] * 3, rows


def test_widths_between_powers_of_two_correct_on_ragged_shapes():
    """Tiles of 144, 224, 176, 80, 16 and 48 columns (`check_wgmma.WIDTHS`), where M and N leave partial tiles and
    K a partial k-block: 77 x 1000 x 520, 1000 x 2056 x 1032, 16 x 1000 x 2056; and the defaults there."""
    import torch

    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("wgmma kernels need a compute capability 9.x GPU")
    shapes = [(77, 1000, 520), (1000, 2056, 1032), (16, 1000, 2056)]
    rows = check_wgmma.run_raw(shapes, names=check_wgmma.WIDTHS)
    assert len(rows) == len(shapes) * (len(check_wgmma.WIDTHS) + 1), rows
    bad = [(r["config"], r["M"], r["N"], r["K"], r["status"], r["message"]) for r in rows if r["status"] != "ok"]
    assert not bad, bad


def test_four_cluster_defaults_correct_on_ragged_shapes():
    """The defaults that take clusters of four (`cluster_m` 4): 128x96 ping-pong pairs where M = 1000 leaves the last
    of eight tile rows 104 rows and N a partial last tile, and the transposed product for C of 65-96 rows, where C's
    rows fill part of the 96-wide tile; K with a partial last k-block."""
    import torch

    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("wgmma kernels need a compute capability 9.x GPU")
    shapes = [(1000, 1400, 2056), (1000, 1416, 1032), (77, 5000, 4104), (65, 4200, 4100)]
    defaults = [check_wgmma.FAMILY.default_params(Shape(*s)) for s in shapes]
    assert [(p["bn"], p["cluster_m"], p.get("swap_ab", 0)) for p in defaults] == [(96, 4, 0)] * 2 + [(96, 4, 1)] * 2
    rows = check_wgmma.run_raw(shapes, names=[])
    assert [(r["config"], r["status"]) for r in rows] == [("default", "ok")] * 4, rows
