"""``with torch.inference_mode():`` (c10::InferenceMode). Inside the block grad mode is off, as
under no_grad, and every tensor made is an *inference tensor* -- no autograd metadata, no version
counter -- except a view of a normal tensor, which stays a normal tensor (its CreationMeta
INFERENCE_MODE forbids an in-place write of it, or of its base, in normal mode, in
handle_view_on_rebase's words: adjoint.engine.view_history.rebase_message). Outside the block an
inference tensor is used as any tensor that does not require grad (a function of it is a normal
tensor, a view of it or its detach() an inference tensor), but PyTorch refuses, each a
RuntimeError: to save it for backward (SavedVariable's constructor, when a node that needs it is
made), to bump its version (VariableVersion::bump, after an in-place kernel wrote it), to set
its requires_grad to True (TensorImpl::set_requires_grad), and to read its ``_version``.
What is not modelled is refused where it would run (a custom Function, checkpoint, a backward or
a grad-mode block while the block runs; the block inside a checkpointed region, a Function's
forward or a hook body; a module's full backward hooks wrapping an inference tensor)."""

from __future__ import annotations

from adjoint.format.errors import ProblemError
from adjoint.engine.torch_errors import TorchError

SAVED = ("Inference tensors cannot be saved for backward. Please do not use Tensors created in inference mode in "
         "computation tracked by autograd. To work around this, you can make a clone to get a normal tensor and use "
         "it in autograd, or use `torch.no_grad()` instead of `torch.inference_mode()`.")
INPLACE = ("Inplace update to inference tensor outside InferenceMode is not allowed.You can make a clone to get a "
           "normal tensor before doing inplace update.See https://github.com/pytorch/rfcs/pull/17 for more details.")
REQUIRES_GRAD = "Setting requires_grad=True on inference tensor outside InferenceMode is not allowed."
VERSION = "Inference tensors do not track version counter."


def check_save(t) -> None:
    """SavedVariable's constructor: an inference tensor is never saved for backward."""
    if t is not None and getattr(t, "inference", False):
        raise TorchError("RuntimeError", SAVED, "inference")


def check_bump(rt, t) -> None:
    """VariableVersion::bump: an inference tensor has no version counter to move outside the block."""
    if t.inference and not rt.inference:
        raise TorchError("RuntimeError", INPLACE, "inference")


def check_version_read(t) -> None:
    if t.inference:
        raise TorchError("RuntimeError", VERSION, "inference")


def refuse_inside(rt, loc, what: str) -> None:
    """Something whose grad-mode or graph handling in inference mode is not modelled."""
    if rt.inference:
        raise ProblemError(loc, f"{what} inside 'with inference_mode():' is not modelled; run it outside the block "
                                "(or use 'with no_grad():')")
