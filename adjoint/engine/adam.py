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

(weight_decay 0, amsgrad and maximize off). Every operation is the value backend's, in the
kernels' order (lerp: ``self + w * (end - self)`` for ``|w| < 0.5``, else ``end - (end - self) *
(1 - w)``; addcmul: ``self + (value * t1) * t2``; addcdiv: ``self + (value * t1) / t2``), so the
exact mode computes the update exactly (``sqrt`` makes it a certified value), float64 rounds as
PyTorch does, and verify's bound backend bounds the rounding. The state (step, exp_avg,
exp_avg_sq) is made on the first step that finds a ``.grad``, as ``Adam._init_group`` does.
``zero_grad()`` sets every ``.grad`` to None (``set_to_none=True``).
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.format.errors import ProblemError
from adjoint.engine.graph import Tensor
from adjoint.engine import warns
from adjoint.engine.torch_errors import TorchError


class Adam:
    """One ``torch.optim.Adam(params, lr, betas, eps)``, its state kept across steps."""

    def __init__(self, decl, params: list[Tensor], nonleaf: bool = False):
        check_settings(decl, nonleaf)
        self.decl = decl
        self.params = list(params)
        self.state: dict = {}   # id(param) -> [step, exp_avg, exp_avg_sq]

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
        B = rt.B
        lr, (beta1, beta2), eps = self.decl.lr, self.decl.betas, self.decl.eps
        complex_param = next((p for p in self.params if getattr(p, "dtype", None) in ("complex64", "complex128")), None)
        if complex_param is not None:   # torch.optim.Adam steps them as view_as_real: not modelled
            raise ProblemError(loc, f"Adam on a complex parameter ({complex_param.dtype}) is not modelled yet "
                                    "(PyTorch steps it as view_as_real); use {step: {lr: ...}} (SGD) for complex "
                                    "parameters")
        for p in self.params:
            if grads is not None:
                g = grads.read(rt, p, loc)
                grad = g.value if g is not None else None
            else:
                grad = p.grad
            if grad is None:
                continue
            state = self.state.get(id(p))
            if state is None:
                shape = tuple(B.shape(p.value))
                state = self.state[id(p)] = [0, B.zeros(shape), B.zeros(shape)]
            state[0] += 1
            step = Fraction(state[0])
            one = B.scalar(1)
            exp_avg = lerp(B, state[1], grad, B.sub(one, B.scalar(beta1)), 1 - beta1 < Fraction(1, 2))
            exp_avg_sq = B.add(B.mul(state[2], B.scalar(beta2)),
                               B.mul(B.mul(B.sub(one, B.scalar(beta2)), grad), grad))
            bias_correction1 = B.sub(one, B.pow(B.scalar(beta1), B.scalar(step)))
            bias_correction2 = B.sub(one, B.pow(B.scalar(beta2), B.scalar(step)))
            step_size = B.div(B.scalar(lr), bias_correction1)
            denom = B.add(B.div(B.sqrt(exp_avg_sq), B.sqrt(bias_correction2)), B.scalar(eps))
            p.value = B.add(p.value, B.div(B.mul(B.neg(step_size), exp_avg), denom))
            p.version.value += 1
            state[1], state[2] = exp_avg, exp_avg_sq


def check_settings(decl, nonleaf: bool = False) -> None:
    """``Adam.__init__``'s checks, in its order, then ``add_param_group``'s: PyTorch's ValueError."""
    lr, (beta1, beta2), eps = decl.lr, decl.betas, decl.eps
    if not 0 <= lr:
        raise TorchError("ValueError", f"Invalid learning rate: {float(lr)}")
    if not 0 <= eps:
        raise TorchError("ValueError", f"Invalid epsilon value: {float(eps)}")
    for i, b in enumerate((beta1, beta2)):
        if not 0 <= b < 1:
            raise TorchError("ValueError", f"Invalid beta parameter at index {i}: {float(b)}")
    if nonleaf:
        raise TorchError("ValueError", "can't optimize a non-leaf Tensor")


def lerp(B, start, end, weight, small: bool):
    """``start.lerp_(end, weight)`` for a Python-number weight (``small``: ``|weight| < 0.5``), as
    ATen's CPU kernel computes it."""
    if small:
        return B.add(start, B.mul(weight, B.sub(end, start)))
    return B.sub(end, B.mul(B.sub(end, start), B.sub(B.scalar(1), weight)))


def optimizer_step(run, decl) -> None:
    """``{step: {optimizer: ...}}``: ``optimizer.step()`` of one optimizer over
    ``model.parameters()`` (a tied Parameter once), made at the variant's first step with these
    settings and kept across its later ones (its state carried over)."""
    made = run.__dict__.setdefault("optimizers", {})
    key = (decl.type, decl.lr, decl.betas, decl.eps)
    if key not in made:
        params = [t for name, t in run.model.params.items() if run.model.decls[name].tied is None]
        made[key] = Adam(decl, params)
    for p in made[key].params:
        if p.grad_fn is not None:   # Adam reads every parameter's .grad: a non-leaf's warns
            warns.warn(run.rt, "UserWarning", warns.NON_LEAF_GRAD)
    made[key].step(run.rt, None, decl.loc)


def make_hook_optimizer(rt, hook, t: Tensor, nonleaf: bool) -> None:
    """A hook's ``optimizer:`` made as the hook is registered (just before, as the recipe makes
    ``optims[p]`` first): PyTorch's ValueError then is an error ``during: register``."""
    rt.hooks_runner.__dict__.setdefault("optimizers", {})[hook.index] = Adam(hook.optimizer, [t], nonleaf)
