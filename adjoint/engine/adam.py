"""``torch.optim.Adam`` as PyTorch 2.13 runs it on CPU: ``foreach=None`` picks the single-tensor
path (``_default_to_fused_or_foreach`` takes foreach only for CUDA/XPU tensors), so each
parameter is updated by ``torch/optim/adam.py``'s ``_single_tensor_adam``, in this order:

    step_t += 1                                   # state["step"]: a 0-d tensor, read back as a float
    exp_avg.lerp_(grad, 1 - beta1)
    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    bias_correction1 = 1 - beta1 ** step          # Python floats
    bias_correction2 = 1 - beta2 ** step
    step_size = lr / bias_correction1
    bias_correction2_sqrt = bias_correction2 ** 0.5
    denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
    param.addcdiv_(exp_avg, denom, value=-step_size)

(with ``amsgrad``, ``torch.maximum(max_exp_avg_sq, exp_avg_sq, out=max_exp_avg_sq)`` and the
denominator from that maximum; ``maximize`` negates the gradient first; ``weight_decay`` is ``grad =
grad.add(param, alpha=weight_decay)`` after ``step_t += 1``, or for AdamW -- Adam with
``decoupled_weight_decay`` -- ``param.mul_(1 - lr * weight_decay)`` in Python floats). Every
operation is the value backend's, in the kernels' order, their fused multiply-adds (``B.fma``:
one rounding) where ATen's CPU kernels use ``vec::fmadd`` (lerp: ``fma(w, end - self, self)``
for ``|w| < 0.5``, else ``fma(-(end - self), 1 - w, end)``; addcmul: ``fma(value * t1, t2,
self)``; ``add(x, y, alpha=a)``: ``fma(a, y, x)``; addcdiv: ``self + (value * t1) / t2``,
unfused), so the
exact mode computes the update exactly (``sqrt`` makes it a certified value), float64 rounds as
PyTorch does, and verify's bound backend bounds the rounding. The state (step, exp_avg,
exp_avg_sq) is made on the first step that finds a ``.grad``, as ``Adam._init_group`` does.
``zero_grad()`` sets every ``.grad`` to None (``set_to_none=True``).

``torch.optim.SGD`` likewise takes ``torch/optim/sgd.py``'s ``_single_tensor_sgd`` on CPU:

    grad = grad if not maximize else -grad
    grad = grad.add(param, alpha=weight_decay)          # weight_decay != 0
    buf = grad.clone() (first step) / buf.mul_(momentum).add_(grad, alpha=1 - dampening)
    grad = grad.add(buf, alpha=momentum) if nesterov else buf       # momentum != 0
    param.add_(grad, alpha=-lr)

each ``add(..., alpha=...)`` one fused multiply-add; its state is the momentum buffer.
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.format.errors import ProblemError
from adjoint.engine.graph import Tensor
from adjoint.engine import warns
from adjoint.engine.torch_errors import TorchError
from adjoint.engine.ops.activations import _extremum_forward


class Adam:
    """One ``torch.optim.Adam`` / ``AdamW`` / ``SGD`` (``decl.type``), its state kept across steps."""

    def __init__(self, decl, params: list[Tensor], nonleaf: bool = False):
        check_settings(decl, nonleaf, empty=not params)
        self.decl = decl
        self.params = list(params)
        self.state: dict = {}   # id(param) -> [step, exp_avg, exp_avg_sq] (Adam) / [momentum_buffer] (SGD)

    # ------------------------------------------------------------------ as a hook body calls it
    def call_method(self, interp, name: str, args: list, kwargs: dict, loc):
        """``optim.step()`` / ``optim.zero_grad()`` in a hook body (``interp.grads``: the
        ``.grad`` the body sees, adjoint.engine.hookwrites.LeafGrads)."""
        if args or kwargs:
            raise ProblemError(loc, f"optim.{name}() is modelled without arguments")
        grads = getattr(interp, "grads", None)
        if name == "step":
            self.step(interp.rt, grads, loc)
            return None
        if name == "zero_grad":
            for p in self.params:
                if grads is not None:
                    grads.assign(p, None, loc)
                else:
                    p.grad = None
            return None
        raise ProblemError(loc, f"optim.{name}() is not modelled; an optimizer has step() and zero_grad()")

    # ------------------------------------------------------------------ the update
    def step(self, rt, grads, loc) -> None:
        complex_param = next((p for p in self.params if getattr(p, "dtype", None) in ("complex64", "complex128")), None)
        if complex_param is not None:   # torch.optim.Adam steps them as view_as_real: not modelled
            how = "" if self.decl.type == "SGD" else " (PyTorch steps it as view_as_real)"
            raise ProblemError(loc, f"{self.decl.type} on a complex parameter ({complex_param.dtype}) is not modelled "
                                    f"yet{how}; use {{step: {{lr: ...}}}} (SGD) for complex parameters")
        for p in self.params:
            if grads is not None:
                g = grads.read(rt, p, loc)
                grad = g.value if g is not None else None
            else:
                grad = p.grad
            if grad is None:
                continue
            if self.decl.type == "SGD":
                self._sgd(rt.B, p, grad)
            else:
                self._adam(rt.B, p, grad)
            p.version.value += 1

    def _adam(self, B, p, grad) -> None:
        """``_single_tensor_adam`` for one parameter (module docstring)."""
        d = self.decl
        lr, (beta1, beta2), eps = d.lr, d.betas, d.eps
        if d.maximize:
            grad = B.neg(grad)
        state = self.state.get(id(p))
        if state is None:
            shape = tuple(B.shape(p.value))
            state = self.state[id(p)] = [0, B.zeros(shape), B.zeros(shape), B.zeros(shape)]   # (+ max_exp_avg_sq)
        state[0] += 1
        step = Fraction(state[0])
        one = B.scalar(1)
        if d.weight_decay != 0 and d.type == "AdamW":   # param.mul_(1 - lr * weight_decay): Python floats
            p.value = B.mul(p.value, B.sub(one, B.mul(B.scalar(lr), B.scalar(d.weight_decay))))
        elif d.weight_decay != 0:                       # grad = grad.add(param, alpha=weight_decay)
            grad = B.fma(B.scalar(d.weight_decay), p.value, grad)
        exp_avg = lerp(B, state[1], grad, B.sub(one, B.scalar(beta1)), 1 - beta1 < Fraction(1, 2))
        # exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2): fma(value * grad, grad, self)
        exp_avg_sq = B.fma(B.mul(B.sub(one, B.scalar(beta2)), grad), grad, B.mul(state[2], B.scalar(beta2)))
        bias_correction1 = B.sub(one, B.float_pow(B.scalar(beta1), B.scalar(step)))   # Python floats
        bias_correction2 = B.sub(one, B.float_pow(B.scalar(beta2), B.scalar(step)))
        step_size = B.div(B.scalar(lr), bias_correction1)
        if d.amsgrad:   # torch.maximum(max_exp_avg_sqs[i], exp_avg_sq, out=max_exp_avg_sqs[i])
            state[3] = _extremum_forward(True)(B, [state[3], exp_avg_sq], None)
            exp_avg_sq_used = state[3]
        else:
            exp_avg_sq_used = exp_avg_sq
        denom = B.add(B.div(B.sqrt(exp_avg_sq_used), B.sqrt(bias_correction2)), B.scalar(eps))
        p.value = B.add(p.value, B.div(B.mul(B.neg(step_size), exp_avg), denom))
        state[1], state[2] = exp_avg, exp_avg_sq

    def _sgd(self, B, p, grad) -> None:
        """``_single_tensor_sgd`` for one parameter: every ``add(..., alpha=...)`` a fused
        multiply-add, as ATen's CPU kernel computes it."""
        d = self.decl
        if d.maximize:
            grad = B.neg(grad)
        if d.weight_decay != 0:                         # grad = grad.add(param, alpha=weight_decay)
            grad = B.fma(B.scalar(d.weight_decay), p.value, grad)
        if d.momentum != 0:
            state = self.state.get(id(p))
            if state is None:                           # buf = grad.detach().clone()
                buf = grad
            else:                                       # buf.mul_(momentum).add_(grad, alpha=1 - dampening)
                buf = B.fma(B.sub(B.scalar(1), B.scalar(d.dampening)), grad, B.mul(state[0], B.scalar(d.momentum)))
            self.state[id(p)] = [buf]
            grad = B.fma(B.scalar(d.momentum), buf, grad) if d.nesterov else buf
        p.value = B.fma(B.neg(B.scalar(d.lr)), grad, p.value)   # param.add_(grad, alpha=-lr)


def check_settings(decl, nonleaf: bool = False, empty: bool = False) -> None:
    """The constructor's checks (``Adam.__init__`` / ``SGD.__init__``), in its order, then
    ``Optimizer.__init__``'s (``empty``: ``list(params)`` is empty, a model without parameters),
    then ``add_param_group``'s: PyTorch's ValueError."""
    lr = decl.lr
    if decl.type == "SGD":
        if lr < 0:
            raise TorchError("ValueError", f"Invalid learning rate: {_shown(lr)}")
        if decl.momentum < 0:
            raise TorchError("ValueError", f"Invalid momentum value: {_shown(decl.momentum)}")
        if decl.weight_decay < 0:
            raise TorchError("ValueError", f"Invalid weight_decay value: {_shown(decl.weight_decay)}")
        if decl.nesterov and (decl.momentum <= 0 or decl.dampening != 0):
            raise TorchError("ValueError", "Nesterov momentum requires a momentum and zero dampening")
    else:
        (beta1, beta2), eps = decl.betas, decl.eps
        if not 0 <= lr:
            raise TorchError("ValueError", f"Invalid learning rate: {_shown(lr)}")
        if not 0 <= eps:
            raise TorchError("ValueError", f"Invalid epsilon value: {_shown(eps)}")
        for i, b in enumerate((beta1, beta2)):
            if not 0 <= b < 1:
                raise TorchError("ValueError", f"Invalid beta parameter at index {i}: {_shown(b)}")
        if not 0 <= decl.weight_decay:
            raise TorchError("ValueError", f"Invalid weight_decay value: {_shown(decl.weight_decay)}")
    if empty:
        raise TorchError("ValueError", "optimizer got an empty parameter list")
    if nonleaf:
        raise TorchError("ValueError", "can't optimize a non-leaf Tensor")


def _shown(x) -> str:
    """A setting as the f-string shows the Python number the file's author typed: a float
    (``0.5``, ``-1.0``)."""
    return str(float(x))


def lerp(B, start, end, weight, small: bool):
    """``start.lerp_(end, weight)`` for a Python-number weight (``small``: ``|weight| < 0.5``), as
    ATen's CPU kernel computes it."""
    if small:   # fmadd(weight, diff, self)
        return B.fma(weight, B.sub(end, start), start)
    return B.fma(B.neg(B.sub(end, start)), B.sub(B.scalar(1), weight), end)   # fnmadd(diff, 1 - weight, end)


def optimizer_step(run, decl, index: int | None = None) -> None:
    """``{step: {optimizer: ...}}``: ``optimizer.step()`` of one optimizer over
    ``model.parameters()`` (a tied Parameter once), made at the variant's first step with these
    settings and kept across its later ones (its state carried over). ``run.optimizer_updates[index]``
    keeps (name, before, grad, after) of each parameter it changed (the sweep's checker, as
    ``run.updates`` for a plain SGD step)."""
    made = run.__dict__.setdefault("optimizers", {})
    key = decl.settings
    if key not in made:
        params = [t for name, t in run.model.params.items() if run.model.decls[name].tied is None]
        made[key] = Adam(decl, params)
    for p in made[key].params:
        if p.grad_fn is not None:   # the optimizer reads every parameter's .grad: a non-leaf's warns
            warns.warn(run.rt, "UserWarning", warns.NON_LEAF_GRAD)
    named = [(name, t, t.value, t.grad) for name, t in run.model.params.items() if run.model.decls[name].tied is None]
    made[key].step(run.rt, None, decl.loc)
    if index is not None:
        run.__dict__.setdefault("optimizer_updates", {})[index] = [
            (name, before, grad, t.value) for name, t, before, grad in named if t.value is not before]


def make_hook_optimizer(rt, hook, t: Tensor, nonleaf: bool) -> None:
    """A hook's ``optimizer:`` made as the hook is registered (just before, as the recipe makes
    ``optims[p]`` first): PyTorch's ValueError then is an error ``during: register``."""
    rt.hooks_runner.__dict__.setdefault("optimizers", {})[hook.index] = Adam(hook.optimizer, [t], nonleaf)
