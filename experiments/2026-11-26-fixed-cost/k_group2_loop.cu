      // Probe fragment (k_group.py splices it over the template's consumer k-loop; not part of the product):
      // two k-blocks per wgmma group, so one fence, commit and wait serve two ring slots.
      int prev2 = -1;  // the second slot of the previous group (prev: its first)
      for (int kb = kb_begin; kb < kb_end; kb += 2) {
        const bool two = kb + 1 < kb_end;
        const int s0 = it % STAGES, s1 = (it + 1) % STAGES;
        mbar_wait(full_bar + 8 * s0, static_cast<uint32_t>(it / STAGES) & 1);
        if (two) mbar_wait(full_bar + 8 * s1, static_cast<uint32_t>((it + 1) / STAGES) & 1);
        fence_acc(acc);
        wgmma_fence();
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          if (j == 0 || two) {
            const int s = j ? s1 : s0;
            const uint32_t a_base = sA + s * A_BYTES + (PINGPONG ? 0 : cw * WG_ROWS) * 128;
            const uint32_t b_base = sB + s * B_BYTES;
#pragma unroll
            for (int k = 0; k < BK / 16; ++k) {
              const uint64_t db = smem_desc_k128(b_base) + 2 * k;
#pragma unroll
              for (int mi = 0; mi < M_ITERS; ++mi) {
                const uint64_t da = smem_desc_k128(a_base + mi * 64 * 128) + 2 * k;
                wgmma_m64k16<BN>(acc[mi], da, db, (kb > kb_begin || j > 0 || k > 0) ? 1 : 0);
              }
            }
          }
        }
        wgmma_commit();
        fence_acc(acc);
        // Keep one group in flight; the slots read by the previous group are free now.
        wgmma_wait<1>();
        if ((wg_thread % 32) == 0) {
          if (prev >= 0) free_slot(empty_bar + 8 * prev);
          if (prev2 >= 0) free_slot(empty_bar + 8 * prev2);
        }
        prev = s0;
        prev2 = two ? s1 : -1;
        it += two ? 2 : 1;
      }
      if (PINGPONG && (wg_thread % 32) == 0) mbar_arrive(order_bar + 8 * (1 - cw));
      wgmma_wait<0>();
      fence_acc(acc);
      if ((wg_thread % 32) == 0) {
        if (prev >= 0) free_slot(empty_bar + 8 * prev);
        if (prev2 >= 0) free_slot(empty_bar + 8 * prev2);
      }
