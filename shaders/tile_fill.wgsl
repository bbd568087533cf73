        // The workgroup's NT invocations load the TM x TK block of A and the TK x TN block of B,
        // in turn, through the operand functions (see matmul.wgsl).
        for (var e = tid; e < TM * TK; e = e + NT) {
            let r = e / TK;
            let kk = e % TK;
            var va = 0.0;
            if (row0 + r < M && k0 + kk < K) {
                va = load_a(row_pos(bi, row0 + r), k_pos(bi, k0 + kk));
            }
            ta[kk][r] = ST(va);
        }
        for (var e = tid; e < TK * TN; e = e + NT) {
            let kb = e / TN;
            let cc = e % TN;
            var vb = 0.0;
            if (k0 + kb < K && col0 + cc < N) {
                vb = load_b(k_pos(bi, k0 + kb), col_pos(bi, col0 + cc));
            }
            tb[kb][cc] = ST(vb);
        }
