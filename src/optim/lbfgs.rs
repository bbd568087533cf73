//! L-BFGS with PyTorch's algorithm (torch.optim.LBFGS), including the strong-Wolfe line search.
//! It re-evaluates the model through a closure and reads scalars (losses, dot products) back
//! from the device every iteration, as PyTorch does.

use super::*;

/// The line search [`LBFGS`] runs along each direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineSearch {
    /// PyTorch's `line_search_fn="strong_wolfe"` (cubic interpolation, c1 1e-4, c2 0.9).
    StrongWolfe,
}

/// Options of [`LBFGS`] (torch.optim.LBFGS's keywords and defaults).
#[derive(Clone, Copy, Debug)]
pub struct LBFGSOptions {
    /// Step length (default 1).
    pub lr: f64,
    /// Iterations per `step` (default 20).
    pub max_iter: usize,
    /// Closure evaluations per `step` (default `max_iter * 5 / 4`).
    pub max_eval: Option<usize>,
    /// Stop when every gradient component is at most this (default 1e-7).
    pub tolerance_grad: f64,
    /// Stop when the loss or the parameters change less than this (default 1e-9).
    pub tolerance_change: f64,
    /// Curvature pairs kept (default 100).
    pub history_size: usize,
    /// None: fixed steps of `lr` (default); or a line search.
    pub line_search_fn: Option<LineSearch>,
    /// Ascend the objective instead (default false).
    pub maximize: bool,
}

impl Default for LBFGSOptions {
    fn default() -> Self {
        LBFGSOptions {
            lr: 1.0,
            max_iter: 20,
            max_eval: None,
            tolerance_grad: 1e-7,
            tolerance_change: 1e-9,
            history_size: 100,
            line_search_fn: None,
            maximize: false,
        }
    }
}

/// What carries over between `step` calls (PyTorch's `state`).
#[derive(Default)]
struct History {
    func_evals: usize,
    n_iter: usize,
    d: Option<Tensor>,
    t: f64,
    old_dirs: Vec<Tensor>,
    old_stps: Vec<Tensor>,
    ro: Vec<f64>,
    h_diag: f64,
    prev_flat_grad: Option<Tensor>,
    prev_loss: f64,
}

/// L-BFGS. Each step needs the closure: `opt.step_closure(&mut || { zero grads; loss;
/// backward; Ok(loss) })`; `step()` without one is an error, as in PyTorch. One parameter group
/// only; the parameters must share a device and dtype.
///
/// ```
/// use wgtorch::optim::{LBFGSOptions, LineSearch, Optimizer, LBFGS};
/// use wgtorch::{Device, Tensor};
/// let w = Tensor::from_slice(&[3.0f32, -2.0], [2], &Device::Cpu)?.requires_grad_(true);
/// let o = LBFGSOptions { line_search_fn: Some(LineSearch::StrongWolfe), ..Default::default() };
/// let mut opt = LBFGS::with_options(vec![w.clone()], o)?;
/// opt.step_closure(&mut || {
///     w.set_grad(None);
///     let loss = w.sub_scalar(1.0)?.square()?.sum_all()?;
///     loss.backward()?;
///     Ok(loss)
/// })?;
/// for v in w.to_vec::<f32>()? {
///     assert!((v - 1.0).abs() < 1e-4);
/// }
/// # Ok::<(), wgtorch::Error>(())
/// ```
pub struct LBFGS {
    groups: Vec<ParamGroup>,
    o: LBFGSOptions,
    max_eval: usize,
    h: History,
}

fn dot(a: &Tensor, b: &Tensor) -> Result<f64> {
    a.mul(b)?.sum_all()?.item()
}

fn abs_max(a: &Tensor) -> Result<f64> {
    a.abs()?.amax([0], false)?.item()
}

/// PyTorch keeps these scalars as float32 tensors; rounding here keeps the trajectory on its.
fn f32r(v: f64) -> f64 {
    v as f32 as f64
}

impl LBFGS {
    /// L-BFGS over `params` with PyTorch's defaults (no line search).
    pub fn new(params: Vec<Tensor>) -> Result<LBFGS> {
        LBFGS::with_options(params, LBFGSOptions::default())
    }
    /// With the given options.
    pub fn with_options(params: Vec<Tensor>, o: LBFGSOptions) -> Result<LBFGS> {
        let op = "LBFGS";
        check(op, o.lr >= 0.0, "learning rate", o.lr)?;
        if let Some(p) = params.first() {
            for q in &params[1..] {
                p.same_device(op, q)?;
                if q.dtype() != p.dtype() {
                    return Err(Error::DTypeMismatch {
                        op,
                        expected: p.dtype(),
                        found: q.dtype(),
                    });
                }
            }
        }
        let groups = resolve_groups(op, vec![ParamGroup::new(params)], o.lr, 0.0)?;
        Ok(LBFGS {
            groups,
            max_eval: o.max_eval.unwrap_or(o.max_iter * 5 / 4),
            o,
            h: History::default(),
        })
    }

    fn params(&self) -> &[Tensor] {
        &self.groups[0].params
    }

    /// Every parameter's gradient (zeros where none), flattened and concatenated; negated
    /// under `maximize`.
    fn flat_grad(&self) -> Result<Tensor> {
        let views = self
            .params()
            .iter()
            .map(|p| match p.grad() {
                Some(g) => g.reshape([-1]),
                None => p.detach().zeros_like()?.reshape([-1]),
            })
            .collect::<Result<Vec<_>>>()?;
        let g = Tensor::cat(&views, 0)?;
        if self.o.maximize {
            g.neg()
        } else {
            Ok(g)
        }
    }

    /// `p += t * update[slice of p]` for every parameter.
    fn add_grad(&self, t: f64, update: &Tensor) -> Result<()> {
        let mut off = 0;
        for p in self.params() {
            let n = p.numel();
            let u = update.narrow(0, off, n)?.reshape(p.shape())?;
            assign(p, &p.add(&u.mul_scalar(t)?)?)?;
            off += n;
        }
        Ok(())
    }

    fn eval(closure: &mut dyn FnMut() -> Result<Tensor>) -> Result<Tensor> {
        let _g = crate::enable_grad();
        closure()
    }

    fn loss_value(&self, loss: &Tensor) -> Result<f64> {
        let v = loss.item()?;
        Ok(if self.o.maximize { -v } else { v })
    }

    /// Loss and flat gradient at `x + t d`, the parameters put back to `x` after.
    fn directional_evaluate(
        &self,
        closure: &mut dyn FnMut() -> Result<Tensor>,
        x: &[Tensor],
        t: f64,
        d: &Tensor,
    ) -> Result<(f64, Tensor)> {
        self.add_grad(t, d)?;
        let loss = Self::eval(closure)?;
        let loss = self.loss_value(&loss)?;
        let g = self.flat_grad()?;
        for (p, v) in self.params().iter().zip(x) {
            assign(p, v)?;
        }
        Ok((loss, g))
    }

    /// PyTorch's `_strong_wolfe`: returns (loss, flat gradient, step, evaluations).
    #[allow(clippy::too_many_arguments)]
    fn strong_wolfe(
        &self,
        closure: &mut dyn FnMut() -> Result<Tensor>,
        x: &[Tensor],
        mut t: f64,
        d: &Tensor,
        f: f64,
        g: Tensor,
        gtd: f64,
        max_ls: usize,
    ) -> Result<(f64, Tensor, f64, usize)> {
        let (c1, c2, tolerance_change) = (1e-4, 0.9, 1e-9);
        let d_norm = abs_max(d)?;
        let (mut f_new, mut g_new) = self.directional_evaluate(closure, x, t, d)?;
        let mut evals = 1;
        let mut gtd_new = dot(&g_new, d)?;
        let (mut t_prev, mut f_prev, mut g_prev, mut gtd_prev) = (0.0, f, g.clone(), gtd);
        let mut done = false;
        let mut ls_iter = 0;
        // Bracket: [(t, f, g, gtd); 1 or 2].
        let mut bracket: Vec<(f64, f64, Tensor, f64)> = vec![];
        while ls_iter < max_ls {
            let both = |g_prev: &Tensor, g_new: &Tensor| {
                vec![
                    (t_prev, f_prev, g_prev.clone(), gtd_prev),
                    (t, f_new, g_new.clone(), gtd_new),
                ]
            };
            if f_new > f + c1 * t * gtd || (ls_iter > 1 && f_new >= f_prev) {
                bracket = both(&g_prev, &g_new);
                break;
            }
            if gtd_new.abs() <= -c2 * gtd {
                bracket = vec![(t, f_new, g_new.clone(), gtd_new)];
                done = true;
                break;
            }
            if gtd_new >= 0.0 {
                bracket = both(&g_prev, &g_new);
                break;
            }
            let (min_step, max_step) = (t + 0.01 * (t - t_prev), t * 10.0);
            let tmp = t;
            t = cubic_interpolate(
                (t_prev, f_prev, gtd_prev),
                (t, f_new, gtd_new),
                Some((min_step, max_step)),
            );
            t_prev = tmp;
            f_prev = f_new;
            g_prev = g_new;
            gtd_prev = gtd_new;
            (f_new, g_new) = self.directional_evaluate(closure, x, t, d)?;
            evals += 1;
            gtd_new = dot(&g_new, d)?;
            ls_iter += 1;
        }
        if ls_iter == max_ls {
            bracket = vec![(0.0, f, g, gtd), (t, f_new, g_new, gtd_new)];
        }
        // Zoom.
        let pos = |b: &[(f64, f64, Tensor, f64)]| {
            if b[0].1 <= b[b.len() - 1].1 {
                (0, 1)
            } else {
                (1, 0)
            }
        };
        let (mut low, mut high) = pos(&bracket);
        let mut insuf_progress = false;
        while !done && ls_iter < max_ls {
            let (b0, b1) = (bracket[0].0, bracket[1].0);
            if (b1 - b0).abs() * d_norm < tolerance_change {
                break;
            }
            t = cubic_interpolate(
                (b0, bracket[0].1, bracket[0].3),
                (b1, bracket[1].1, bracket[1].3),
                None,
            );
            let (bmax, bmin) = (b0.max(b1), b0.min(b1));
            let eps = 0.1 * (bmax - bmin);
            if (bmax - t).min(t - bmin) < eps {
                if insuf_progress || t >= bmax || t <= bmin {
                    t = if (t - bmax).abs() < (t - bmin).abs() {
                        bmax - eps
                    } else {
                        bmin + eps
                    };
                    insuf_progress = false;
                } else {
                    insuf_progress = true;
                }
            } else {
                insuf_progress = false;
            }
            let (fn_, gn) = self.directional_evaluate(closure, x, t, d)?;
            evals += 1;
            let gtdn = dot(&gn, d)?;
            ls_iter += 1;
            if fn_ > f + c1 * t * gtd || fn_ >= bracket[low].1 {
                bracket[high] = (t, fn_, gn, gtdn);
                (low, high) = pos(&bracket);
            } else {
                if gtdn.abs() <= -c2 * gtd {
                    done = true;
                } else if gtdn * (bracket[high].0 - bracket[low].0) >= 0.0 {
                    bracket[high] = bracket[low].clone();
                }
                bracket[low] = (t, fn_, gn, gtdn);
            }
        }
        let (t, f_new, g_new, _) = bracket.swap_remove(low);
        Ok((f_new, g_new, t, evals))
    }

    fn run(&mut self, closure: &mut dyn FnMut() -> Result<Tensor>) -> Result<Tensor> {
        let _ng = crate::no_grad();
        let orig_loss = Self::eval(closure)?;
        if self.params().is_empty() {
            return Ok(orig_loss);
        }
        let lr = self.groups[0].lr.get();
        let o = self.o;
        let mut loss = self.loss_value(&orig_loss)?;
        let mut current_evals = 1;
        self.h.func_evals += 1;
        let mut flat_grad = self.flat_grad()?;
        if abs_max(&flat_grad)? <= o.tolerance_grad {
            return Ok(orig_loss);
        }
        let mut n_iter = 0;
        while n_iter < o.max_iter {
            n_iter += 1;
            self.h.n_iter += 1;
            let h = &mut self.h;
            let d = if h.n_iter == 1 {
                h.old_dirs.clear();
                h.old_stps.clear();
                h.ro.clear();
                h.h_diag = 1.0;
                flat_grad.neg()?
            } else {
                let (Some(prev), Some(d)) = (&h.prev_flat_grad, &h.d) else {
                    return Err(Error::arg("LBFGS", "missing state from the previous step"));
                };
                let y = flat_grad.sub(prev)?;
                let s = d.mul_scalar(h.t)?;
                let ys = f32r(dot(&y, &s)?);
                if ys > 1e-10 {
                    if h.old_dirs.len() == o.history_size {
                        h.old_dirs.remove(0);
                        h.old_stps.remove(0);
                        h.ro.remove(0);
                    }
                    h.h_diag = f32r(ys / f32r(dot(&y, &y)?));
                    h.old_dirs.push(y);
                    h.old_stps.push(s);
                    h.ro.push(f32r(1.0 / ys));
                }
                let k = h.old_dirs.len();
                let mut al = vec![0.0; k];
                let mut q = flat_grad.neg()?;
                for i in (0..k).rev() {
                    al[i] = f32r(f32r(dot(&h.old_stps[i], &q)?) * h.ro[i]);
                    q = q.sub(&h.old_dirs[i].mul_scalar(al[i])?)?;
                }
                let mut r = q.mul_scalar(h.h_diag)?;
                for (i, a) in al.iter().enumerate() {
                    let be_i = f32r(f32r(dot(&h.old_dirs[i], &r)?) * h.ro[i]);
                    r = r.add(&h.old_stps[i].mul_scalar(f32r(a - be_i))?)?;
                }
                r
            };
            h.prev_flat_grad = Some(flat_grad.clone());
            h.prev_loss = loss;
            let mut t = if h.n_iter == 1 {
                f32r(1.0f64.min(f32r(1.0 / flat_grad.abs()?.sum_all()?.item()?)) * lr)
            } else {
                lr
            };
            let gtd = f32r(dot(&flat_grad, &d)?);
            h.d = Some(d.clone());
            h.t = t;
            if gtd > -o.tolerance_change {
                break;
            }
            let mut ls_evals = 0;
            let mut opt_cond = false;
            match o.line_search_fn {
                Some(LineSearch::StrongWolfe) => {
                    let x: Vec<Tensor> = self
                        .params()
                        .iter()
                        .map(|p| p.detach().mul_scalar(1.0)) // a copy
                        .collect::<Result<_>>()?;
                    let max_ls = self.max_eval.saturating_sub(current_evals);
                    let (l, g, tt, e) =
                        self.strong_wolfe(closure, &x, t, &d, loss, flat_grad, gtd, max_ls)?;
                    (loss, flat_grad, t, ls_evals) = (l, g, tt, e);
                    self.h.t = t;
                    self.add_grad(t, &d)?;
                    opt_cond = abs_max(&flat_grad)? <= o.tolerance_grad;
                }
                None => {
                    self.add_grad(t, &d)?;
                    if n_iter != o.max_iter {
                        let l = Self::eval(closure)?;
                        loss = self.loss_value(&l)?;
                        flat_grad = self.flat_grad()?;
                        opt_cond = abs_max(&flat_grad)? <= o.tolerance_grad;
                        ls_evals = 1;
                    }
                }
            }
            current_evals += ls_evals;
            self.h.func_evals += ls_evals;
            if n_iter == o.max_iter || current_evals >= self.max_eval || opt_cond {
                break;
            }
            if abs_max(&d.mul_scalar(t)?)? <= o.tolerance_change {
                break;
            }
            if (loss - self.h.prev_loss).abs() < o.tolerance_change {
                break;
            }
        }
        Ok(orig_loss)
    }
}

/// PyTorch's `_cubic_interpolate`: the minimiser of the cubic through two points with their
/// derivatives, clamped to `bounds` (default the points' interval).
fn cubic_interpolate(
    (x1, f1, g1): (f64, f64, f64),
    (x2, f2, g2): (f64, f64, f64),
    bounds: Option<(f64, f64)>,
) -> f64 {
    let (lo, hi) = bounds.unwrap_or(if x1 <= x2 { (x1, x2) } else { (x2, x1) });
    let d1 = g1 + g2 - 3.0 * (f1 - f2) / (x1 - x2);
    let d2_square = d1 * d1 - g1 * g2;
    if d2_square >= 0.0 {
        let d2 = d2_square.sqrt();
        let min_pos = if x1 <= x2 {
            x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2.0 * d2))
        } else {
            x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2.0 * d2))
        };
        min_pos.max(lo).min(hi)
    } else {
        (lo + hi) / 2.0
    }
}

impl Optimizer for LBFGS {
    /// Refused: L-BFGS re-evaluates the model, so it needs [`Optimizer::step_closure`].
    fn step(&mut self) -> Result<()> {
        crate::onnx::trace::refuse_under_capture("an optimizer step")?;
        Err(Error::arg(
            "LBFGS",
            "step() missing 1 required positional argument: 'closure' (use step_closure)",
        ))
    }
    fn step_closure(&mut self, closure: &mut dyn FnMut() -> Result<Tensor>) -> Result<Tensor> {
        let _p = crate::profiler::scope("Optimizer.step#LBFGS.step");
        self.run(closure)
    }
    fn param_groups(&self) -> &[ParamGroup] {
        &self.groups
    }
    fn param_groups_mut(&mut self) -> &mut [ParamGroup] {
        &mut self.groups
    }
    /// The history as flat tensors (`lbfgs.d`, `lbfgs.prev_flat_grad`, `lbfgs.old_dirs.{i}`,
    /// `lbfgs.old_stps.{i}`) and scalars (`lbfgs.t`, `lbfgs.h_diag`, `lbfgs.ro.{i}`, counts).
    fn state_dict(&self) -> OptimState {
        let h = &self.h;
        let mut s = OptimState::default();
        let mut put = |k: String, t: &Option<Tensor>| {
            if let Some(t) = t {
                s.tensors.push((k, t.clone()));
            }
        };
        put("lbfgs.d".into(), &h.d);
        put("lbfgs.prev_flat_grad".into(), &h.prev_flat_grad);
        for (i, (y, st)) in h.old_dirs.iter().zip(&h.old_stps).enumerate() {
            put(format!("lbfgs.old_dirs.{i}"), &Some(y.clone()));
            put(format!("lbfgs.old_stps.{i}"), &Some(st.clone()));
        }
        s.scalars.extend([
            ("lbfgs.func_evals".to_string(), h.func_evals as f64),
            ("lbfgs.n_iter".to_string(), h.n_iter as f64),
            ("lbfgs.t".to_string(), h.t),
            ("lbfgs.h_diag".to_string(), h.h_diag),
            ("lbfgs.prev_loss".to_string(), h.prev_loss),
        ]);
        for (i, r) in h.ro.iter().enumerate() {
            s.scalars.push((format!("lbfgs.ro.{i}"), *r));
        }
        save_lrs(&self.groups, &mut s);
        s
    }
    /// Restore the history: every key known, every vector of the parameters' total size, as
    /// many `ro` as curvature pairs; checked before anything changes.
    fn load_state_dict(&mut self, s: &OptimState) -> Result<()> {
        let op = "load_state_dict";
        let n: usize = self.params().iter().map(Tensor::numel).sum();
        let (dev, dt) = match self.params().first() {
            Some(p) => (p.device(), p.dtype()),
            None => (crate::Device::Cpu, crate::DType::F32),
        };
        let unexpected = |k: &str| Error::arg(op, format!("unexpected optimizer state key {k}"));
        let mut h = History::default();
        let (mut dirs, mut stps) = (vec![], vec![]);
        for (k, t) in &s.tensors {
            if t.shape() != [n] {
                return Err(Error::shape(
                    op,
                    format!(
                        "optimizer state {k} has shape {:?} but the parameters hold {n} elements",
                        t.shape()
                    ),
                ));
            }
            let t = t.detach().to_dtype(dt)?.to(&dev)?;
            let idx = |p: &str| k.strip_prefix(p).and_then(|i| i.parse::<usize>().ok());
            match k.as_str() {
                "lbfgs.d" => h.d = Some(t),
                "lbfgs.prev_flat_grad" => h.prev_flat_grad = Some(t),
                _ => match (idx("lbfgs.old_dirs."), idx("lbfgs.old_stps.")) {
                    (Some(i), _) => dirs.push((i, t)),
                    (_, Some(i)) => stps.push((i, t)),
                    _ => return Err(unexpected(k)),
                },
            }
        }
        let mut ro = vec![];
        for (k, v) in &s.scalars {
            let v = *v;
            let count = || -> Result<usize> {
                super::exact_count(v).map(|c| c as usize).ok_or_else(|| {
                    Error::arg(op, format!("optimizer state {k} = {v} is not a count"))
                })
            };
            match k.as_str() {
                "lbfgs.func_evals" => h.func_evals = count()?,
                "lbfgs.n_iter" => h.n_iter = count()?,
                "lbfgs.t" => h.t = v,
                "lbfgs.h_diag" => h.h_diag = v,
                "lbfgs.prev_loss" => h.prev_loss = v,
                "lr.0" if !v.is_nan() && v >= 0.0 => {}
                _ => match k
                    .strip_prefix("lbfgs.ro.")
                    .and_then(|i| i.parse::<usize>().ok())
                {
                    Some(i) => ro.push((i, v)),
                    None => return Err(unexpected(k)),
                },
            }
        }
        for list in [&mut dirs, &mut stps] {
            list.sort_by_key(|(i, _)| *i);
        }
        ro.sort_by_key(|x| x.0);
        let in_order = |ix: &mut dyn Iterator<Item = usize>| ix.enumerate().all(|(j, i)| i == j);
        if dirs.len() != stps.len()
            || dirs.len() != ro.len()
            || dirs.len() > self.o.history_size
            || !in_order(&mut dirs.iter().map(|x| x.0))
            || !in_order(&mut stps.iter().map(|x| x.0))
            || !in_order(&mut ro.iter().map(|x| x.0))
        {
            return Err(Error::arg(
                op,
                format!(
                    "LBFGS state holds {} old_dirs, {} old_stps and {} ro (numbered from 0, at most history_size {})",
                    dirs.len(),
                    stps.len(),
                    ro.len(),
                    self.o.history_size
                ),
            ));
        }
        if h.n_iter > 0 && (h.d.is_none() || h.prev_flat_grad.is_none()) {
            return Err(Error::arg(
                op,
                "LBFGS state after a step needs lbfgs.d and lbfgs.prev_flat_grad",
            ));
        }
        h.old_dirs = dirs.into_iter().map(|x| x.1).collect();
        h.old_stps = stps.into_iter().map(|x| x.1).collect();
        h.ro = ro.into_iter().map(|x| x.1).collect();
        if let Some((_, lr)) = s.scalars.iter().find(|(k, _)| k == "lr.0") {
            self.groups[0].lr.set(*lr);
        }
        self.h = h;
        Ok(())
    }
}
