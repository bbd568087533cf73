        // 256 invocations load a 64x16 tile of A and a 16x64 tile of B, 4 elements each, through
        // the operand functions (see matmul.wgsl).
        for (var e = 0u; e < 4u; e = e + 1u) {
            let idx = tid + e * 256u;
            let r = idx / TK;
            let kk = idx % TK;
            var va = 0.0;
            if (row0 + r < M && k0 + kk < K) {
                va = load_a(row_pos(bi, row0 + r), k_pos(bi, k0 + kk));
            }
            ta[kk][r] = va;
            let kb = idx / TS;
            let cc = idx % TS;
            var vb = 0.0;
            if (k0 + kb < K && col0 + cc < N) {
                vb = load_b(k_pos(bi, k0 + kb), col_pos(bi, col0 + cc));
            }
            tb[kb][cc] = vb;
        }
