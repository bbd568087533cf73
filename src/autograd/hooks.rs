//! Hooks the backward pass runs when a leaf's gradient is complete (PyTorch's
//! `register_post_accumulate_grad_hook`), the signal that data-parallel training uses to start
//! a gradient's all-reduce while the rest of the backward pass runs.

use crate::tensor::TensorImpl;
use crate::{Error, Result, Tensor};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

/// A post-accumulate-grad hook: called with the leaf once its `.grad()` holds this backward
/// pass's gradient. An error it returns ends the backward pass with that error.
pub type GradHook = Arc<dyn Fn(&Tensor) -> Result<()> + Send + Sync>;

static NEXT_HOOK: AtomicU64 = AtomicU64::new(1);

/// Removes the hook it was returned for (PyTorch's `RemovableHandle`). Dropping the handle
/// keeps the hook; call [`HookHandle::remove`].
#[derive(Debug)]
pub struct HookHandle {
    tensor: Weak<TensorImpl>,
    id: u64,
}

impl HookHandle {
    /// Unregister the hook (nothing happens if the tensor is gone).
    pub fn remove(self) {
        if let Some(t) = self.tensor.upgrade() {
            t.post_grad_hooks.lock().retain(|(id, _)| *id != self.id);
        }
    }
}

impl Tensor {
    /// Run `hook(&leaf)` after each backward pass has accumulated this leaf's gradient into
    /// [`Tensor::grad`] (PyTorch's `register_post_accumulate_grad_hook`). The engine calls it
    /// as soon as every use of the leaf has contributed, not at the end of the pass, so the
    /// last layer's parameters are ready first. Only leaves that require grad take one.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use wgtorch::{Device, Tensor};
    /// let w = Tensor::from_vec(vec![1.0f32, 2.0], [2], &Device::Cpu)?.requires_grad_(true);
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let s = seen.clone();
    /// let handle = w.register_post_accumulate_grad_hook(move |p| {
    ///     s.lock().unwrap().push(p.grad().unwrap().to_vec::<f32>()?);
    ///     Ok(())
    /// })?;
    /// (&w * 3.0).sum_all()?.backward()?;
    /// assert_eq!(*seen.lock().unwrap(), vec![vec![3.0, 3.0]]);
    /// handle.remove();
    /// (&w * 3.0).sum_all()?.backward()?; // no longer called
    /// assert_eq!(seen.lock().unwrap().len(), 1);
    /// # Ok::<(), wgtorch::Error>(())
    /// ```
    pub fn register_post_accumulate_grad_hook(
        &self,
        hook: impl Fn(&Tensor) -> Result<()> + Send + Sync + 'static,
    ) -> Result<HookHandle> {
        if !self.is_leaf() {
            return Err(Error::Autograd(
                "post accumulate grad hooks cannot be registered on non-leaf tensors".into(),
            ));
        }
        if !self.requires_grad() {
            return Err(Error::Autograd(
                "cannot register a hook on a tensor that doesn't require gradient".into(),
            ));
        }
        let id = NEXT_HOOK.fetch_add(1, Ordering::Relaxed);
        self.0.post_grad_hooks.lock().push((id, Arc::new(hook)));
        Ok(HookHandle {
            tensor: Arc::downgrade(&self.0),
            id,
        })
    }

    /// Run this leaf's post-accumulate-grad hooks, in registration order.
    pub(crate) fn run_post_grad_hooks(&self) -> Result<()> {
        let hooks: Vec<GradHook> = {
            let h = self.0.post_grad_hooks.lock();
            if h.is_empty() {
                return Ok(());
            }
            h.iter().map(|(_, f)| f.clone()).collect()
        };
        hooks.iter().try_for_each(|f| f(self))
    }
}
