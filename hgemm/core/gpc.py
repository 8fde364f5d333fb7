"""Where thread-block clusters fit: a cluster runs inside one GPC, so how many fit at once depends on the SMs per
GPC, not only on their total. Read by the analytic model (cluster waves) and by the wgmma family's defaults
(clusters of four only where the grid fits in one round)."""

from __future__ import annotations

# SMs per GPC of the 132-SM Hopper parts: a layout that fits the measured residency of DSMEM split-K clusters (it
# holds 30 clusters of 4 CTAs, 14 of 8, 66 of 2): 128 CTAs in clusters of 4 or 8 take about twice as long as 112 or
# fewer.
HOPPER_132_GPC_SMS = (18, 18, 18, 18, 16, 16, 14, 14)


def gpc_sms(sm_count: int) -> tuple[int, ...]:
    """SMs per GPC: the 132-SM Hopper layout, else the SMs spread evenly over GPCs of about 16."""
    if sm_count == sum(HOPPER_132_GPC_SMS):
        return HOPPER_132_GPC_SMS
    gpcs = max(1, round(sm_count / 16.5))
    base, extra = divmod(sm_count, gpcs)
    return (base + 1,) * extra + (base,) * (gpcs - extra)


def resident_clusters(size: int, ctas_per_sm: int, sm_count: int) -> int:
    """Clusters of `size` CTAs that fit on the GPU at once, each inside one GPC."""
    return sum(g * ctas_per_sm // size for g in gpc_sms(sm_count))
