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
        let src = k.source();
        let module = naga::front::wgsl::parse_str(&src)
            .unwrap_or_else(|e| panic!("{key}: parse error\n{}", e.emit_to_string(&src)));
        naga::valid::Validator::new(
            naga::valid::ValidationFlags::all(),
            naga::valid::Capabilities::all(),
        )
        .validate(&module)
        .unwrap_or_else(|e| panic!("{key}: validation error: {e:?}"));
    }
}
