//! LSTM (multi-layer, optional batch_first), PyTorch's gate order (i, f, g, o) and parameter names.

use super::init;
use super::module::{Forward, Kind, Module};
use crate::{Device, Error, Result, Tensor};

/// One LSTM layer's parameters.
struct LstmLayer {
    w_ih: Tensor,
    w_hh: Tensor,
    b_ih: Tensor,
    b_hh: Tensor,
}

/// Long short-term memory. `forward_with_state` returns `(output, (h_n, c_n))`; `forward` just the
/// output. Parameters are named `weight_ih_l{k}`, `weight_hh_l{k}`, `bias_ih_l{k}`, `bias_hh_l{k}`.
pub struct Lstm {
    layers: Vec<LstmLayer>,
    /// Hidden size.
    pub hidden_size: usize,
    /// Inputs are `[batch, seq, feature]` when true, else `[seq, batch, feature]`.
    pub batch_first: bool,
}

impl Lstm {
    /// A new LSTM with every weight drawn from U(±1/√hidden_size), as PyTorch does.
    pub fn new(
        input_size: usize,
        hidden_size: usize,
        num_layers: usize,
        batch_first: bool,
        dev: &Device,
    ) -> Result<Lstm> {
        let k = 1.0 / (hidden_size.max(1) as f64).sqrt();
        let p = |shape: &[usize]| -> Result<Tensor> {
            let t = Tensor::zeros(shape, dev)?;
            init::uniform_(&t, -k, k)?;
            Ok(t.requires_grad_(true))
        };
        let mut layers = Vec::new();
        for l in 0..num_layers {
            let inp = if l == 0 { input_size } else { hidden_size };
            layers.push(LstmLayer {
                w_ih: p(&[4 * hidden_size, inp])?,
                w_hh: p(&[4 * hidden_size, hidden_size])?,
                b_ih: p(&[4 * hidden_size])?,
                b_hh: p(&[4 * hidden_size])?,
            });
        }
        Ok(Lstm {
            layers,
            hidden_size,
            batch_first,
        })
    }

    /// Run the sequence from the initial state `(h0, c0)` (zeros if `None`), each
    /// `[num_layers, batch, hidden]`. Returns the last layer's outputs and the final states.
    pub fn forward_with_state(
        &self,
        x: &Tensor,
        state: Option<(&Tensor, &Tensor)>,
    ) -> Result<(Tensor, (Tensor, Tensor))> {
        if x.ndim() != 3 {
            return Err(Error::shape(
                "LSTM",
                format!("input must be 3-D, got {:?}", x.shape()),
            ));
        }
        let x = if self.batch_first {
            x.clone()
        } else {
            x.transpose(0, 1)?
        }; // [B, T, F]
        let (b, t) = (x.shape()[0], x.shape()[1]);
        let (nl, h) = (self.layers.len(), self.hidden_size);
        let (h0, c0) = match state {
            Some((h0, c0)) => (h0.clone(), c0.clone()),
            None => (
                Tensor::zeros([nl, b, h], &x.device())?,
                Tensor::zeros([nl, b, h], &x.device())?,
            ),
        };
        if h0.shape() != [nl, b, h] || c0.shape() != [nl, b, h] {
            return Err(Error::shape(
                "LSTM",
                format!(
                    "expected hidden states of shape {:?}, got {:?} and {:?}",
                    [nl, b, h],
                    h0.shape(),
                    c0.shape()
                ),
            ));
        }
        let mut seq = x;
        let (mut hs, mut cs) = (Vec::new(), Vec::new());
        for (l, p) in self.layers.iter().enumerate() {
            // Input projections for every step at once: [B, T, 4H].
            let xi = seq.linear(&p.w_ih, Some(&p.b_ih))?.add(&p.b_hh)?;
            let mut hl = h0.narrow(0, l, 1)?.squeeze_dim(0)?;
            let mut cl = c0.narrow(0, l, 1)?.squeeze_dim(0)?;
            let mut outs = Vec::with_capacity(t);
            for s in 0..t {
                let gates = xi
                    .narrow(1, s, 1)?
                    .squeeze_dim(1)?
                    .add(&hl.matmul(&p.w_hh.t()?)?)?;
                let g = gates.chunk(4, 1)?;
                let (i, f, gg, o) = (
                    g[0].sigmoid()?,
                    g[1].sigmoid()?,
                    g[2].tanh()?,
                    g[3].sigmoid()?,
                );
                cl = f.mul(&cl)?.add(&i.mul(&gg)?)?;
                hl = o.mul(&cl.tanh()?)?;
                outs.push(hl.clone());
            }
            seq = Tensor::stack(&outs, 1)?;
            hs.push(hl);
            cs.push(cl);
        }
        let out = if self.batch_first {
            seq
        } else {
            seq.transpose(0, 1)?
        };
        Ok((out, (Tensor::stack(&hs, 0)?, Tensor::stack(&cs, 0)?)))
    }
}

impl Forward for Lstm {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(self.forward_with_state(x, None)?.0)
    }
}

impl Module for Lstm {
    fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, Kind)) {
        for (l, p) in self.layers.iter().enumerate() {
            f(&format!("weight_ih_l{l}"), &p.w_ih, Kind::Param);
            f(&format!("weight_hh_l{l}"), &p.w_hh, Kind::Param);
            f(&format!("bias_ih_l{l}"), &p.b_ih, Kind::Param);
            f(&format!("bias_hh_l{l}"), &p.b_hh, Kind::Param);
        }
    }
    fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, Kind)) {
        for (l, p) in self.layers.iter_mut().enumerate() {
            f(&format!("weight_ih_l{l}"), &mut p.w_ih, Kind::Param);
            f(&format!("weight_hh_l{l}"), &mut p.w_hh, Kind::Param);
            f(&format!("bias_ih_l{l}"), &mut p.b_ih, Kind::Param);
            f(&format!("bias_hh_l{l}"), &mut p.b_hh, Kind::Param);
        }
    }
}
