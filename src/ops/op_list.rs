//! `op_enum!`: an op enum declared from one list, with its `ALL` constant and its names, so a new
//! op cannot be left out of a list built from `ALL` (the GPU kernels naga validates,
//! `Kernel::all`) and every per-op property is an exhaustive `match` next to the enum.

/// Declares `pub enum $E` with the given variants, `$E::ALL` (every variant, each parameter at
/// the example value written after `=`, in declaration order) and `$E::name` (the string after
/// `=>`).
macro_rules! op_enum {
    (
        $(#[$em:meta])*
        pub enum $E:ident {
            $(
                $(#[$m:meta])*
                $v:ident $(( $($t:ty = $ex:expr),+ ))? => $name:literal,
            )*
        }
    ) => {
        $(#[$em])*
        pub enum $E {
            $( $(#[$m])* $v $(( $($t),+ ))?, )*
        }

        impl $E {
            /// Every op, in declaration order (parameters at an example value).
            pub const ALL: &'static [$E] = &[ $( $E::$v $(( $($ex),+ ))? ),* ];

            /// PyTorch's name, used in pipeline keys, errors and the profiler.
            pub fn name(&self) -> &'static str {
                match self {
                    $( $E::$v { .. } => $name, )*
                }
            }
        }
    };
}
