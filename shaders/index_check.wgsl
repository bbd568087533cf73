// Index validation (src/backend/gpu/checks.rs). Each host thread has a slot of 5 words in
// `index_flag`: [thread token, op id, index, dim, size], token 0 while no failure is recorded.
// A kernel's params hold [op id, slot, token] at `at`; its thread's next readback reports the
// first failure recorded since its last one as an error.
@group(0) @binding({{BINDING}}) var<storage, read_write> index_flag: array<atomic<u32>>;

// Whether 0 <= j < size; if not, the failure is recorded unless one of this thread's is already
// (tokens only grow: a slot's earlier owner's record loses to its current owner's).
fn index_ok(j: i32, size: u32, dim: u32, at: u32) -> bool {
    if (j >= 0 && u32(j) < size) {
        return true;
    }
    let s = params[at + 1u] * 5u;
    let token = params[at + 2u];
    if (atomicMax(&index_flag[s], token) < token) {
        atomicStore(&index_flag[s + 1u], params[at]);
        atomicStore(&index_flag[s + 2u], bitcast<u32>(j));
        atomicStore(&index_flag[s + 3u], dim);
        atomicStore(&index_flag[s + 4u], size);
    }
    return false;
}
