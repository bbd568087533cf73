//! Every WGSL variant the engine can request parses and validates with naga, so a shader error
//! fails here and never reaches a user.

use wgtorch::backend::gpu::kernels::Kernel;

#[test]
fn every_kernel_variant_validates_with_naga() {
    let all = Kernel::all();
    assert!(
        all.len() > 80,
        "expected the full variant list, got {}",
        all.len()
    );
    let mut keys = std::collections::HashSet::new();
    for k in all {
        let key = k.key();
        assert!(keys.insert(key.clone()), "duplicate pipeline key {key}");
        validate(&key, &k.source());
    }
}

/// Parses and validates `src` with naga, panicking with `what` and naga's message.
fn validate(what: &str, src: &str) {
    let module = naga::front::wgsl::parse_str(src)
        .unwrap_or_else(|e| panic!("{what}: parse error\n{}", e.emit_to_string(src)));
    naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::all(),
    )
    .validate(&module)
    .unwrap_or_else(|e| panic!("{what}: validation error: {e:?}\n{src}"));
}

/// The fused elementwise kernels are generated per program: one program holding every unary op
/// and every arithmetic binary op, over the most inputs a program reads, validates.
#[test]
fn a_fused_program_of_every_op_validates_with_naga() {
    use wgtorch::ops::fused::{FusedProgram, MAX_FUSED_INPUTS};
    use wgtorch::ops::{BinaryOp, UnaryOp};
    let mut p = FusedProgram::new(MAX_FUSED_INPUTS).unwrap();
    let mut r = p.binary(BinaryOp::Add, 0, 1).unwrap();
    for j in 2..MAX_FUSED_INPUTS {
        r = p.binary(BinaryOp::Mul, r, j).unwrap();
    }
    for &op in UnaryOp::ALL {
        r = p.unary(op, r).unwrap();
    }
    for &op in BinaryOp::ALL.iter().filter(|op| !op.is_comparison()) {
        r = p.binary(op, r, 0).unwrap();
    }
    validate(&p.key(), &wgtorch::backend::gpu::kernels::fused_source(&p));
}
