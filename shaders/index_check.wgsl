// Index validation (src/backend/gpu/checks.rs). Each host thread has a slot of 5 words in
// `index_flag`: [thread token, op id, index, dim, size], token 0 while no failure is recorded.
// A checking kernel's params hold them as `check` (IndexCheck: op id, slot, token); its thread's
// next readback reports the first failure recorded since its last one as an error.
@group(0) @binding({{BINDING}}) var<storage, read_write> index_flag: array<atomic<u32>>;

// Record a failure unless one of this thread's is already recorded (tokens only grow: a slot's
// earlier owner's record loses to its current owner's).
fn record_failure(j: i32, size: u32, dim: u32) {
    let s = params.check.slot * 5u;
    let token = params.check.token;
    if (atomicMax(&index_flag[s], token) < token) {
        atomicStore(&index_flag[s + 1u], params.check.op);
        atomicStore(&index_flag[s + 2u], bitcast<u32>(j));
        atomicStore(&index_flag[s + 3u], dim);
        atomicStore(&index_flag[s + 4u], size);
    }
}

// Whether 0 <= j < size; if not, the failure is recorded.
fn index_ok(j: i32, size: u32, dim: u32) -> bool {
    if (j >= 0 && u32(j) < size) {
        return true;
    }
    record_failure(j, size, dim);
    return false;
}

// The integer divisor d, or, for a zero, 1 after recording the failure with dim 0xffffffff (no
// dimension: checks.rs reports it as PyTorch's ZeroDivisionError).
fn checked_divisor(d: i32) -> i32 {
    if (d != 0) {
        return d;
    }
    record_failure(0, 0u, 0xffffffffu);
    return 1;
}
