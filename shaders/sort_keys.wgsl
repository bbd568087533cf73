// Bitonic row sort, stage 1 of 3: each row of a contiguous [rows, n] input, padded to P entries,
// as (key, index) pairs. The key is an order-preserving u32 of the value's bits: f32 with NaN
// above +inf and -0 equal to 0 (PyTorch's order), or i32. Padding entries (index >= n) are
// ordered after every real entry by the compare stage, whatever their key.
// params: SortKeysParams
// bindings: 1 src (f32 or i32 bits), 2 keys, 3 idx
{{DECLS}}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let t = linear_id(wid, lid);
    if (t >= params.total) {
        return;
    }
    let n = params.n;
    let p = params.p;
    let row = t / p;
    let c = t % p;
    var key = 0xffffffffu;
    if (c < n) {
        var b = ld_src(row * n + c);
        if (params.is_float == 1u) {
            let mag = b & 0x7fffffffu;
            if (mag <= 0x7f800000u) {
                if (mag == 0u) {
                    b = 0u;
                }
                key = select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u);
            }
        } else {
            key = b ^ 0x80000000u;
        }
    }
    st_keys(t, key);
    st_idx(t, c);
}
