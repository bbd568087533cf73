//! Recurrent layers: `RNN` (tanh or relu), `LSTM` and `GRU`, multi-layer, bidirectional, with
//! dropout between layers; PyTorch's gate orders (LSTM i, f, g, o; GRU r, z, n), parameter names
//! (`weight_ih_l0`, ..., `bias_hh_l1_reverse`) and initialisation (every tensor U(±1/√hidden_size)).
//!
//! Each layer and direction projects the whole input sequence once (one GEMM), then steps through
//! time with the hidden-to-hidden product only.

use super::init;
use super::layers::Dropout;
use super::module::{Forward, Kind, Module};
use crate::{Device, Error, Result, Tensor};

/// The recurrence of a plain [`RNN`]: `h' = act(W_ih x + b_ih + W_hh h + b_hh)`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Nonlinearity {
    /// `tanh` (PyTorch's default).
    #[default]
    Tanh,
    /// `relu`.
    Relu,
}

/// The keyword arguments PyTorch's `nn.RNN`, `nn.LSTM` and `nn.GRU` share; `Default` is
/// PyTorch's defaults. `nonlinearity` is read by [`RNN`] only.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RNNOptions {
    /// Stacked layers (default 1).
    pub num_layers: usize,
    /// `tanh` or `relu` ([`RNN`] only; default tanh).
    pub nonlinearity: Nonlinearity,
    /// Whether the layer has `bias_ih_l*` / `bias_hh_l*` (default true).
    pub bias: bool,
    /// Inputs and outputs are `[batch, seq, feature]` when true, else `[seq, batch, feature]`
    /// (default false). Hidden states are `[layers * directions, batch, hidden]` either way.
    pub batch_first: bool,
    /// Dropout on the outputs of every layer but the last, in training mode (default 0).
    pub dropout: f64,
    /// Run a second direction from the end of the sequence (default false); outputs concatenate
    /// both directions' hidden states.
    pub bidirectional: bool,
    /// LSTM only: project each hidden state to `proj_size` features with `weight_hr_l*`
    /// (default 0: no projection); `h` then has `proj_size` features, `c` keeps `hidden_size`.
    pub proj_size: usize,
}

impl Default for RNNOptions {
    fn default() -> Self {
        RNNOptions {
            num_layers: 1,
            nonlinearity: Nonlinearity::Tanh,
            bias: true,
            batch_first: false,
            dropout: 0.0,
            bidirectional: false,
            proj_size: 0,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cell {
    Rnn(Nonlinearity),
    Lstm,
    Gru,
}

impl Cell {
    fn name(self) -> &'static str {
        match self {
            Cell::Rnn(_) => "RNN",
            Cell::Lstm => "LSTM",
            Cell::Gru => "GRU",
        }
    }
    fn gates(self) -> usize {
        match self {
            Cell::Rnn(_) => 1,
            Cell::Lstm => 4,
            Cell::Gru => 3,
        }
    }
}

/// One layer's weights in one direction.
struct Weights {
    w_ih: Tensor,
    w_hh: Tensor,
    b_ih: Option<Tensor>,
    b_hh: Option<Tensor>,
    w_hr: Option<Tensor>,
}

/// What the three layers share: the weights (layer-major, then direction) and the loop.
struct RNNBase {
    cell: Cell,
    weights: Vec<Weights>,
    input_size: usize,
    hidden_size: usize,
    options: RNNOptions,
    dropout: Dropout,
}

impl RNNBase {
    fn new(
        cell: Cell,
        input_size: usize,
        hidden_size: usize,
        options: RNNOptions,
        dev: &Device,
    ) -> Result<RNNBase> {
        let op = cell.name();
        if hidden_size == 0 {
            return Err(Error::arg(op, "hidden_size must be greater than zero"));
        }
        if options.num_layers == 0 {
            return Err(Error::arg(
                op,
                "num_layers must be greater than or equal to 1",
            ));
        }
        if !(0.0..=1.0).contains(&options.dropout) {
            return Err(Error::arg(op, format!("dropout should be a number in range [0, 1] representing the probability of an element being zeroed, got {}", options.dropout)));
        }
        if options.proj_size > 0 && cell != Cell::Lstm {
            return Err(Error::arg(
                op,
                "proj_size argument is only supported for LSTM, not RNN or GRU",
            ));
        }
        if options.proj_size >= hidden_size {
            return Err(Error::arg(op, format!("proj_size has to be smaller than hidden_size (proj_size {}, hidden_size {hidden_size})", options.proj_size)));
        }
        let dirs = if options.bidirectional { 2 } else { 1 };
        let real = if options.proj_size > 0 {
            options.proj_size
        } else {
            hidden_size
        };
        let g = crate::shape::checked_mul(op, cell.gates(), hidden_size, &[hidden_size])?;
        let k = 1.0 / (hidden_size as f64).sqrt();
        let p = |shape: &[usize]| -> Result<Tensor> {
            crate::shape::checked_numel(op, shape)?;
            let t = Tensor::zeros(shape, dev)?;
            init::uniform_(&t, -k, k)?;
            Ok(t.requires_grad_(true))
        };
        let mut weights = Vec::new();
        for l in 0..options.num_layers {
            let inp = if l == 0 { input_size } else { real * dirs };
            for _ in 0..dirs {
                weights.push(Weights {
                    w_ih: p(&[g, inp])?,
                    w_hh: p(&[g, real])?,
                    b_ih: options.bias.then(|| p(&[g])).transpose()?,
                    b_hh: options.bias.then(|| p(&[g])).transpose()?,
                    w_hr: (options.proj_size > 0)
                        .then(|| p(&[real, hidden_size]))
                        .transpose()?,
                });
            }
        }
        Ok(RNNBase {
            cell,
            weights,
            input_size,
            hidden_size,
            options,
            dropout: Dropout::new(options.dropout)?,
        })
    }

    fn dirs(&self) -> usize {
        if self.options.bidirectional {
            2
        } else {
            1
        }
    }

    /// Features of `h` (and of each direction's output): `proj_size` when projecting.
    fn h_size(&self) -> usize {
        if self.options.proj_size > 0 {
            self.options.proj_size
        } else {
            self.hidden_size
        }
    }

    /// Check an initial state against `[layers * dirs, (batch,) features]`, or make zeros.
    fn state(
        &self,
        s: Option<&Tensor>,
        batch: Option<usize>,
        (which, features): (&str, usize),
        x: &Tensor,
    ) -> Result<Tensor> {
        let op = self.cell.name();
        let mut want = vec![self.options.num_layers * self.dirs()];
        want.extend(batch);
        want.push(features);
        let Some(s) = s else {
            return Tensor::zeros(&want, &x.device())?.to_dtype(x.dtype());
        };
        if s.ndim() != want.len() {
            let kind = if batch.is_some() {
                "batched 3-D"
            } else {
                "unbatched 2-D"
            };
            return Err(Error::shape(
                op,
                format!(
                    "For {kind} input, {which} should also be {}-D but got {}-D tensor",
                    want.len(),
                    s.ndim()
                ),
            ));
        }
        if s.shape() != want.as_slice() {
            return Err(Error::shape(
                op,
                format!("Expected {which} size {want:?}, got {:?}", s.shape()),
            ));
        }
        Ok(s.clone())
    }

    /// Run the stack. Returns the output and the final `h` (and `c` for LSTM).
    fn run(
        &self,
        x: &Tensor,
        h0: Option<&Tensor>,
        c0: Option<&Tensor>,
    ) -> Result<(Tensor, Tensor, Option<Tensor>)> {
        let op = self.cell.name();
        if x.ndim() != 2 && x.ndim() != 3 {
            return Err(Error::shape(
                op,
                format!(
                    "{op}: Expected input to be 2D or 3D, got {}D tensor instead",
                    x.ndim()
                ),
            ));
        }
        let feat = x.shape()[x.ndim() - 1];
        if feat != self.input_size {
            return Err(Error::shape(
                op,
                format!(
                    "input.size(-1) must be equal to input_size. Expected {}, got {feat}",
                    self.input_size
                ),
            ));
        }
        let batched = x.ndim() == 3;
        // Time-major [T, B, F] inside.
        let seq = match (batched, self.options.batch_first) {
            (false, _) => x.unsqueeze(1)?,
            (true, true) => x.transpose(0, 1)?,
            (true, false) => x.clone(),
        };
        let batch = batched.then(|| seq.shape()[1]);
        let hidden = if self.cell == Cell::Lstm {
            "hidden[0]"
        } else {
            "hx"
        };
        let lift = |s: Tensor| if batched { Ok(s) } else { s.unsqueeze(1) };
        let h0 = lift(self.state(h0, batch, (hidden, self.h_size()), x)?)?;
        let c0 = match self.cell {
            Cell::Lstm => Some(lift(self.state(
                c0,
                batch,
                ("hidden[1]", self.hidden_size),
                x,
            )?)?),
            _ => None,
        };
        let (t_len, dirs) = (seq.shape()[0], self.dirs());
        let mut seq = seq;
        let (mut hs, mut cs) = (Vec::new(), Vec::new());
        for l in 0..self.options.num_layers {
            let mut outs = Vec::with_capacity(dirs);
            for d in 0..dirs {
                let k = l * dirs + d;
                let h = h0.narrow(0, k, 1)?.squeeze_dim(0)?;
                let c = c0
                    .as_ref()
                    .map(|c| c.narrow(0, k, 1)?.squeeze_dim(0))
                    .transpose()?;
                let (out, h, c) = self.direction(&self.weights[k], &seq, h, c, d == 1, t_len)?;
                outs.push(out);
                hs.push(h);
                cs.extend(c);
            }
            seq = if dirs == 1 {
                outs.remove(0)
            } else {
                Tensor::cat(&outs, 2)?
            };
            if l + 1 < self.options.num_layers {
                seq = self.dropout.forward(&seq)?;
            }
        }
        let unlift = |s: Tensor| if batched { Ok(s) } else { s.squeeze_dim(1) };
        let out = match (batched, self.options.batch_first) {
            (false, _) => seq.squeeze_dim(1)?,
            (true, true) => seq.transpose(0, 1)?,
            (true, false) => seq,
        };
        let h_n = unlift(Tensor::stack(&hs, 0)?)?;
        let c_n = if cs.is_empty() {
            None
        } else {
            Some(unlift(Tensor::stack(&cs, 0)?)?)
        };
        Ok((out, h_n, c_n))
    }

    /// One layer in one direction over `seq` `[T, B, F]`: outputs `[T, B, H]`, last `h` (and `c`).
    /// Under an ONNX export it records one LSTM or GRU node.
    fn direction(
        &self,
        w: &Weights,
        seq: &Tensor,
        h: Tensor,
        c: Option<Tensor>,
        reverse: bool,
        t_len: usize,
    ) -> Result<(Tensor, Tensor, Option<Tensor>)> {
        let trace = crate::onnx::trace::scope();
        let (h0, c0) = (h.clone(), c.clone());
        let out = self.direction_untraced(w, seq, h, c, reverse, t_len)?;
        if let Some(t) = &trace {
            t.record(|r| {
                let (kind, order): (&str, &[usize]) = match self.cell {
                    Cell::Lstm => ("LSTM", &[0, 3, 1, 2]),
                    Cell::Gru => ("GRU", &[1, 0, 2]),
                    Cell::Rnn(_) => {
                        return Err(Error::msg(
                            "ONNX export: nn.RNN has no ONNX form here (LSTM and GRU do)",
                        ))
                    }
                };
                if w.w_hr.is_some() {
                    return Err(Error::msg(
                        "ONNX export: LSTM with proj_size has no ONNX form here",
                    ));
                }
                let rnn = crate::onnx::forms::Rnn {
                    kind,
                    gate_order: order,
                    hidden: self.hidden_size,
                    reverse,
                    w_ih: &w.w_ih,
                    w_hh: &w.w_hh,
                    b_ih: w.b_ih.as_ref(),
                    b_hh: w.b_hh.as_ref(),
                };
                crate::onnx::forms::rnn(r, &rnn, seq, &h0, c0.as_ref(), &out)
            });
        }
        Ok(out)
    }

    /// [`direction`](Self::direction) itself.
    fn direction_untraced(
        &self,
        w: &Weights,
        seq: &Tensor,
        mut h: Tensor,
        mut c: Option<Tensor>,
        reverse: bool,
        t_len: usize,
    ) -> Result<(Tensor, Tensor, Option<Tensor>)> {
        // Input projections for every step at once; b_hh folds in except GRU's (n uses r * (W_hn h + b_hn)).
        let mut xi = seq.linear(&w.w_ih, w.b_ih.as_ref())?;
        if let (Some(b), false) = (&w.b_hh, self.cell == Cell::Gru) {
            xi = xi.add(b)?;
        }
        if let (Cell::Lstm, Some(c), None) = (self.cell, &c, &w.w_hr) {
            let (out, h, c) = crate::ops::lstm_layer(&xi, &w.w_hh, &h, c, reverse)?;
            return Ok((out, h, Some(c)));
        }
        let w_hh_t = w.w_hh.t()?;
        let mut outs = vec![None; t_len];
        for s in 0..t_len {
            let s = if reverse { t_len - 1 - s } else { s };
            let xs = xi.narrow(0, s, 1)?.squeeze_dim(0)?;
            let hh = h.matmul(&w_hh_t)?;
            h = match (self.cell, &mut c) {
                (Cell::Rnn(Nonlinearity::Tanh), _) => xs.add(&hh)?.tanh()?,
                (Cell::Rnn(Nonlinearity::Relu), _) => xs.add(&hh)?.relu()?,
                (Cell::Lstm, Some(c)) => {
                    let (h, c2) = crate::ops::lstm_cell(&xs, &hh, c)?;
                    *c = c2;
                    match &w.w_hr {
                        Some(w_hr) => h.matmul(&w_hr.t()?)?,
                        None => h,
                    }
                }
                (Cell::Gru, _) => {
                    let hh = match &w.b_hh {
                        Some(b) => hh.add(b)?,
                        None => hh,
                    };
                    let (xg, hg) = (xs.chunk(3, 1)?, hh.chunk(3, 1)?);
                    let r = xg[0].add(&hg[0])?.sigmoid()?;
                    let z = xg[1].add(&hg[1])?.sigmoid()?;
                    let n = xg[2].add(&r.mul(&hg[2])?)?.tanh()?;
                    // (1 - z) * n + z * h
                    n.add(&z.mul(&h.sub(&n)?)?)?
                }
                (Cell::Lstm, None) => return Err(Error::arg("LSTM", "missing cell state")),
            };
            outs[s] = Some(h.clone());
        }
        let outs: Vec<Tensor> = outs.into_iter().flatten().collect();
        let out = if outs.is_empty() {
            Tensor::zeros([0, h.shape()[0], self.h_size()], &h.device())?.to_dtype(h.dtype())?
        } else {
            Tensor::stack(&outs, 0)?
        };
        Ok((out, h, c))
    }

    fn names(&self) -> impl Iterator<Item = (String, usize)> + '_ {
        let dirs = self.dirs();
        (0..self.weights.len()).map(move |k| {
            let sfx = if k % dirs == 1 { "_reverse" } else { "" };
            (format!("l{}{sfx}", k / dirs), k)
        })
    }

    fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, Kind)) {
        for (s, k) in self.names() {
            let w = &self.weights[k];
            f(&format!("weight_ih_{s}"), &w.w_ih, Kind::Param);
            f(&format!("weight_hh_{s}"), &w.w_hh, Kind::Param);
            if let (Some(bi), Some(bh)) = (&w.b_ih, &w.b_hh) {
                f(&format!("bias_ih_{s}"), bi, Kind::Param);
                f(&format!("bias_hh_{s}"), bh, Kind::Param);
            }
            if let Some(w) = &w.w_hr {
                f(&format!("weight_hr_{s}"), w, Kind::Param);
            }
        }
    }

    fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, Kind)) {
        let names: Vec<(String, usize)> = self.names().collect();
        for (s, k) in names {
            let w = &mut self.weights[k];
            f(&format!("weight_ih_{s}"), &mut w.w_ih, Kind::Param);
            f(&format!("weight_hh_{s}"), &mut w.w_hh, Kind::Param);
            if let (Some(bi), Some(bh)) = (&mut w.b_ih, &mut w.b_hh) {
                f(&format!("bias_ih_{s}"), bi, Kind::Param);
                f(&format!("bias_hh_{s}"), bh, Kind::Param);
            }
            if let Some(w) = &mut w.w_hr {
                f(&format!("weight_hr_{s}"), w, Kind::Param);
            }
        }
    }
}

macro_rules! recurrent {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        pub struct $name {
            base: RNNBase,
        }
        impl $name {
            /// `input_size` features in, `hidden_size` out; one layer, PyTorch's defaults.
            pub fn new(input_size: usize, hidden_size: usize, dev: &Device) -> Result<$name> {
                $name::with_options(input_size, hidden_size, RNNOptions::default(), dev)
            }
            /// Features expected on input.
            pub fn input_size(&self) -> usize {
                self.base.input_size
            }
            /// Features of the hidden state.
            pub fn hidden_size(&self) -> usize {
                self.base.hidden_size
            }
            /// The options it was built with.
            pub fn options(&self) -> &RNNOptions {
                &self.base.options
            }
        }
        /// The output sequence only (`forward_with_state` also gives the final state).
        impl Forward for $name {
            fn forward(&self, x: &Tensor) -> Result<Tensor> {
                Ok(self.base.run(x, None, None)?.0)
            }
        }
        impl Module for $name {
            fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, Kind)) {
                self.base.visit(f)
            }
            fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, Kind)) {
                self.base.visit_mut(f)
            }
            fn set_training(&mut self, on: bool) {
                self.base.dropout.set_training(on)
            }
            fn training_flag(&self) -> Option<bool> {
                self.base.dropout.training_flag()
            }
        }
    };
}

recurrent!(
    /// Elman RNN, `h' = act(W_ih x + b_ih + W_hh h + b_hh)` with tanh or relu (PyTorch's `nn.RNN`).
    ///
    /// ```
    /// use wgtorch::nn::{RNNOptions, Nonlinearity, RNN};
    /// use wgtorch::{Device, Tensor};
    /// let dev = Device::Cpu;
    /// let opts = RNNOptions { num_layers: 2, nonlinearity: Nonlinearity::Relu, ..Default::default() };
    /// let rnn = RNN::with_options(3, 5, opts, &dev)?;
    /// let (out, h_n) = rnn.forward_with_state(&Tensor::randn([4, 2, 3], &dev)?, None)?;
    /// assert_eq!((out.shape(), h_n.shape()), (&[4, 2, 5][..], &[2, 2, 5][..]));
    /// # Ok::<(), wgtorch::Error>(())
    /// ```
    RNN
);
recurrent!(
    /// Long short-term memory (PyTorch's `nn.LSTM`; gates i, f, g, o; `proj_size` projections).
    ///
    /// ```
    /// use wgtorch::nn::{RNNOptions, LSTM};
    /// use wgtorch::{Device, Tensor};
    /// let dev = Device::Cpu;
    /// let opts = RNNOptions { batch_first: true, bidirectional: true, ..Default::default() };
    /// let lstm = LSTM::with_options(3, 4, opts, &dev)?;
    /// let (out, (h_n, c_n)) = lstm.forward_with_state(&Tensor::randn([2, 6, 3], &dev)?, None)?;
    /// assert_eq!(out.shape(), &[2, 6, 8]);
    /// assert_eq!((h_n.shape(), c_n.shape()), (&[2, 2, 4][..], &[2, 2, 4][..]));
    /// # Ok::<(), wgtorch::Error>(())
    /// ```
    LSTM
);
recurrent!(
    /// Gated recurrent unit (PyTorch's `nn.GRU`; gates r, z, n):
    /// `n = tanh(W_in x + b_in + r * (W_hn h + b_hn))`, `h' = (1 - z) * n + z * h`.
    ///
    /// ```
    /// use wgtorch::nn::GRU;
    /// use wgtorch::{Device, Tensor};
    /// let dev = Device::Cpu;
    /// let gru = GRU::new(3, 4, &dev)?;
    /// let (out, h_n) = gru.forward_with_state(&Tensor::randn([5, 2, 3], &dev)?, None)?;
    /// assert_eq!((out.shape(), h_n.shape()), (&[5, 2, 4][..], &[1, 2, 4][..]));
    /// # Ok::<(), wgtorch::Error>(())
    /// ```
    GRU
);

impl RNN {
    /// Every option (`num_layers`, `nonlinearity`, `bias`, `batch_first`, `dropout`, `bidirectional`).
    pub fn with_options(
        input_size: usize,
        hidden_size: usize,
        options: RNNOptions,
        dev: &Device,
    ) -> Result<RNN> {
        let cell = Cell::Rnn(options.nonlinearity);
        Ok(RNN {
            base: RNNBase::new(cell, input_size, hidden_size, options, dev)?,
        })
    }
    /// Run from `h0` (`[layers * directions, batch, hidden]`, zeros if `None`); returns the
    /// output (`[seq, batch, directions * hidden]`, batch first if so built) and `h_n`.
    /// Unbatched `[seq, feature]` input takes and gives states without the batch dim.
    pub fn forward_with_state(&self, x: &Tensor, h0: Option<&Tensor>) -> Result<(Tensor, Tensor)> {
        let (out, h, _) = self.base.run(x, h0, None)?;
        Ok((out, h))
    }
}

impl GRU {
    /// Every option but `nonlinearity`, which GRU ignores.
    pub fn with_options(
        input_size: usize,
        hidden_size: usize,
        options: RNNOptions,
        dev: &Device,
    ) -> Result<GRU> {
        Ok(GRU {
            base: RNNBase::new(Cell::Gru, input_size, hidden_size, options, dev)?,
        })
    }
    /// Run from `h0` (zeros if `None`); returns `(output, h_n)` as [`RNN::forward_with_state`].
    pub fn forward_with_state(&self, x: &Tensor, h0: Option<&Tensor>) -> Result<(Tensor, Tensor)> {
        let (out, h, _) = self.base.run(x, h0, None)?;
        Ok((out, h))
    }
}

impl LSTM {
    /// Every option but `nonlinearity`, which LSTM ignores.
    pub fn with_options(
        input_size: usize,
        hidden_size: usize,
        options: RNNOptions,
        dev: &Device,
    ) -> Result<LSTM> {
        Ok(LSTM {
            base: RNNBase::new(Cell::Lstm, input_size, hidden_size, options, dev)?,
        })
    }
    /// Run from `(h0, c0)` (each `[layers * directions, batch, hidden]`, zeros if `None`); returns
    /// `(output, (h_n, c_n))`.
    pub fn forward_with_state(
        &self,
        x: &Tensor,
        state: Option<(&Tensor, &Tensor)>,
    ) -> Result<(Tensor, (Tensor, Tensor))> {
        let (out, h, c) = self.base.run(x, state.map(|s| s.0), state.map(|s| s.1))?;
        let c = c.ok_or_else(|| Error::arg("LSTM", "missing cell state"))?;
        Ok((out, (h, c)))
    }
}
