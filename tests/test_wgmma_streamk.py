"""Stream-K in the "wgmma" family, checked without a GPU: parameter rules, repair, the model's view of
it, and one real nvcc build (sm_90a + sm_80) of the stream-K template path.
"""

from __future__ import annotations

import shutil

import pytest
from hgemm.agent.model import predict
from hgemm.evaluator.kernels.wgmma_family import FAMILIES, HOPPER_SMEM_OPTIN
from hgemm.evaluator.static_check import check_source
from nvcc_build import build_without_spills, entry_report

from hgemm.core.record import GpuInfo
from hgemm.core.shape import Shape

FAMILY = FAMILIES["wgmma"]
H200 = GpuInfo(name="NVIDIA H200", cc="9.0", driver="x", sm_count=132, l2_bytes=60 << 20,
               smem_per_block_optin=HOPPER_SMEM_OPTIN)  # fmt: skip
SK = {"bm": 128, "bn": 128, "stages": 6, "consumers": 2, "group_m": 8, "persistent": 1, "epilogue": 1,
      "cluster_m": 1, "pingpong": 0, "split_k": 1, "split_dsmem": 0, "epi_panels": 0, "stream_k": 1}  # fmt: skip


def test_stream_k_config_is_valid_with_tma_store_and_with_a_cluster():
    tall = Shape(12288, 256, 16384)
    assert FAMILY.check(SK, tall, H200) is None
    assert FAMILY.check({**SK, "bn": 256, "stages": 3, "cluster_m": 2}, tall, H200) is None


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"persistent": 0}, "needs persistent=1"),
        ({"split_k": 4, "epilogue": 0}, "split_k=1"),
        ({"pingpong": 1}, "pingpong=0"),
        ({"stream_k": 2}, "stream_k=2 not in"),
    ],
)
def test_stream_k_rejections(change, needle):
    reason = FAMILY.check({**SK, **change}, Shape(12288, 256, 16384), H200)
    assert reason is not None and needle in reason


def test_repair_makes_a_stream_k_move_valid():
    split = {**SK, "stream_k": 0, "split_k": 4, "epilogue": 0, "persistent": 0, "pingpong": 0}
    moved = FAMILY.repair({**split, "stream_k": 1})
    assert moved["split_k"] == 1 and moved["persistent"] == 1
    assert FAMILY.check(moved, Shape(12288, 256, 16384), H200) is None
    pingpong = FAMILY.repair({**SK, "pingpong": 1})
    assert pingpong["pingpong"] == 0 and FAMILY.check(pingpong, Shape(12288, 256, 16384), H200) is None


def test_stream_k_off_is_the_same_kernel_with_or_without_the_parameter():
    off = FAMILY.render({**SK, "stream_k": 0})
    assert "#define HG_STREAM_K 0\n" in off
    assert off == FAMILY.render({k: v for k, v in SK.items() if k != "stream_k"})
    on = FAMILY.render(SK)
    assert "#define HG_STREAM_K 1\n" in on and check_source(on) == []


def test_model_credits_stream_k_only_where_the_last_wave_is_partial():
    partial = Shape(12288, 256, 16384)  # 192 tiles of 128 x 128 on 132 SMs: the second wave is 45% full
    full = Shape(4224, 512, 4096)  # 132 tiles x 4 = 528: whole waves
    for shape, better in ((partial, True), (full, False)):
        dp = predict(FAMILY, {**SK, "stream_k": 0}, shape, H200)
        sk = predict(FAMILY, SK, shape, H200)
        assert (sk.us < dp.us) is better, (shape, dp.us, sk.us)
    sk = predict(FAMILY, SK, partial, H200)
    assert sk.busiest_sm_tiles == pytest.approx(192 / 132)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
def test_stream_k_compiles_for_sm90a_and_sm80_without_spills(tmp_path):
    log = build_without_spills(FAMILY.render(SK), tmp_path)
    assert entry_report(log, "hgemm_wgmma_kernel")  # built for sm_90a
