"""The physical floor: each term, offline vs server, and that it stays a lower bound."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from hgemm.evaluator.gpu_facts import BW_HEADROOM, PEAK_HEADROOM, floor_us  # noqa: E402

from hgemm.core.shape import Shape  # noqa: E402

FACTS = {"peak_tflops": 760.0, "bandwidth_gbs": 4300.0, "launch_us": 0.7}
L2 = 60 << 20


def test_tiny_shapes_sit_on_the_launch_floor():
    assert floor_us(FACTS, Shape(64, 64, 64), "offline", L2) == 0.7
    assert floor_us(FACTS, Shape(64, 64, 64), "server", L2) == 0.7


def test_large_square_is_bound_by_the_matrix_peak_with_headroom():
    M = N = K = 8192
    expect = 2 * M * N * K / (760e12 * PEAK_HEADROOM) * 1e6
    assert floor_us(FACTS, Shape(M, N, K), "offline", L2) == pytest.approx(expect)
    assert expect < 2 * M * N * K / 760e12 * 1e6  # a kernel may beat the library's measured peak a little


def test_skinny_shape_is_bound_by_bytes_and_offline_discounts_a_warm_l2():
    M, N, K = 128, 12288, 12288
    nbytes = 2 * (M * K + K * N + M * N)
    server = floor_us(FACTS, Shape(M, N, K), "server", L2)
    offline = floor_us(FACTS, Shape(M, N, K), "offline", L2)
    assert server == pytest.approx(nbytes / (4300e9 * BW_HEADROOM) * 1e6)
    assert offline == pytest.approx((nbytes - L2) / (4300e9 * BW_HEADROOM) * 1e6)
    # cuBLAS ran this shape in 73.6 us on an H200 (4.2 TB/s of reads): the floor must stay below it
    assert server < 73.6 and offline < 73.6


def test_operands_that_fit_in_l2_have_no_bytes_term_offline():
    assert floor_us(FACTS, Shape(1024, 1024, 1024), "offline", L2) == pytest.approx(
        max(2 * 1024**3 / (760e12 * PEAK_HEADROOM) * 1e6, 0.7))
