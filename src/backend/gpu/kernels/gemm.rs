//! The GEMM operand kinds ([`Gemm`]): the matmul and the three convolution products, each a
//! `shaders/gemm_*.wgsl` file of position and load functions that one GEMM body reads through.

use super::{fill, GpuType};
use crate::ops::UnaryOp;

const GEMM_STRIDED: &str = include_str!("../../../../shaders/gemm_strided.wgsl");
const GEMM_CONV_FORWARD: &str = include_str!("../../../../shaders/gemm_conv_forward.wgsl");
const GEMM_CONV_INPUT: &str = include_str!("../../../../shaders/gemm_conv_input.wgsl");
const GEMM_CONV_WEIGHT: &str = include_str!("../../../../shaders/gemm_conv_weight.wgsl");

/// Where a GEMM kernel's operands come from (`shaders/gemm_*.wgsl`): one GEMM body serves the
/// matmul and the three convolution products, which read their operands through the window
/// arithmetic instead of a materialised column buffer (implicit GEMM).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Gemm {
    /// Batched strided matmul.
    Strided,
    /// conv2d forward, one batch entry per sample, the per-channel bias added in the epilogue
    /// (zeros when there is none: one pipeline, one shader compilation, either way), then
    /// optionally a residual of the output's shape and a relu (`conv2d_fused`, f32).
    ConvForward {
        /// Adds the residual (binding 5).
        residual: bool,
        /// Applies relu last.
        relu: bool,
    },
    /// conv2d's input gradient, one batch entry per sample.
    ConvInput,
    /// conv2d's weight gradient, one batch entry per split of the samples.
    ConvWeight,
}

impl Gemm {
    pub(super) fn key(self) -> &'static str {
        match self {
            Gemm::Strided => "matmul",
            Gemm::ConvForward {
                residual: false,
                relu: false,
            } => "conv2d",
            Gemm::ConvForward {
                residual: false,
                relu: true,
            } => "conv2d_relu",
            Gemm::ConvForward {
                residual: true,
                relu: false,
            } => "conv2d_add",
            Gemm::ConvForward {
                residual: true,
                relu: true,
            } => "conv2d_add_relu",
            Gemm::ConvInput => "conv2d_input_grad",
            Gemm::ConvWeight => "conv2d_weight_grad",
        }
    }
    pub(super) fn source(self, t: GpuType, body: &str) -> String {
        let ops = match self {
            Gemm::Strided => GEMM_STRIDED,
            Gemm::ConvForward { .. } => GEMM_CONV_FORWARD,
            Gemm::ConvInput => GEMM_CONV_INPUT,
            Gemm::ConvWeight => GEMM_CONV_WEIGHT,
        };
        let mut bindings = vec![("a", t, false), ("b", t, false), ("c", t, true)];
        // The forward convolution's epilogue reads the bias (zeros when the layer has none), its
        // fused finish the residual.
        let (mut finish, mut act) = ("v", "x");
        if let Gemm::ConvForward { residual, relu } = self {
            bindings.push(("bias", t, false));
            if residual {
                bindings.push(("res", t, false));
                finish = "v + ld_res(i)";
            }
            if relu {
                // relu's own expression of x (NaN and -0 kept, as the op's kernel).
                act = UnaryOp::Relu.wgsl();
            }
        }
        let body = body.replace("{{OPERANDS}}", ops);
        let subs = [("FINISH", finish), ("ACT", act)];
        fill(&body, &bindings, &subs)
    }
    /// Every operand kind (for the validation tests).
    pub const ALL: [Gemm; 7] = [
        Gemm::Strided,
        Gemm::ConvForward {
            residual: false,
            relu: false,
        },
        Gemm::ConvForward {
            residual: false,
            relu: true,
        },
        Gemm::ConvForward {
            residual: true,
            relu: false,
        },
        Gemm::ConvForward {
            residual: true,
            relu: true,
        },
        Gemm::ConvInput,
        Gemm::ConvWeight,
    ];
}
