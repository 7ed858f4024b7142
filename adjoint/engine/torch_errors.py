"""PyTorch's own errors, as a run of the file provokes them: a prediction, never bad input."""

from __future__ import annotations

#: A dtype as PyTorch's messages name its scalar type ("Expected dtype int32/int64 for index but got: Float").
TYPE_NAMES = {"float32": "Float", "float64": "Double", "int64": "Long", "bool": "Bool", "complex64": "ComplexFloat",
              "complex128": "ComplexDouble"}


#: A tensor's type as ``TensorBase::toString`` names it in "hook 'hook' has changed the type of value
#: (was torch.FloatTensor got CPUBoolType)": the legacy tensor type where there is one, else the
#: dispatch key and scalar type (checked in torch 2.13 for every pair of these dtypes).
TENSOR_TYPE_NAMES = {"float32": "torch.FloatTensor", "float64": "torch.DoubleTensor", "int64": "torch.LongTensor",
                     "bool": "CPUBoolType", "complex64": "CPUComplexFloatType", "complex128": "CPUComplexDoubleType"}


def changed_type(original: str, result: str) -> "TorchError":
    """``check_variable_result``'s error for a hook whose result has another dtype than the
    gradient it replaces (checked before its size)."""
    return TorchError("RuntimeError", f"hook 'hook' has changed the type of value (was {TENSOR_TYPE_NAMES[original]} "
                                      f"got {TENSOR_TYPE_NAMES[result]})", "hook_result")


def torch_size(shape) -> str:
    """A shape as PyTorch's messages print it: ``torch.Size([2, 3])``."""
    return f"torch.Size([{', '.join(str(d) for d in shape)}])"


def complex_mismatch(at: int, grad_dtype: str, of: int, out_dtype: str) -> str:
    """_make_grads' error for a gradient and an output of which one is complex, the other not."""
    return ("For complex Tensors, both grad_output and output are required to have the same dtype. Mismatch in "
            f"dtype: grad_output[{at}] has a dtype of torch.{grad_dtype} and output[{of}] has a dtype of "
            f"torch.{out_dtype}.")


class TorchError(Exception):
    """An error PyTorch raises while running the file (the contract's ``error``).

    ``cause`` says why, for the reports: ``hook_raised`` (a hook or a pack/unpack with
    ``raises``), ``freed_graph`` (backward through saved tensors already freed),
    ``saved_modified`` (a saved tensor modified in place since), ``leaf_inplace`` (an in-place op
    on a leaf that requires grad, or a view of one), ``view_inplace`` (an in-place op on a view
    PyTorch forbids to modify: a custom Function's or a multi-output op's output, a view made
    under no_grad), ``hook_result`` (a hook returned what PyTorch refuses), ``dtype`` (a kernel refuses
    its operands' dtypes: ``-b`` or ``b - x`` for a bool ``b``, a float result written in place
    into a bool or int64 tensor, the backward of ``x ** b``), ``hook_arity`` (a pack hook taking more
    parameters than the one tensor PyTorch hands it), ``pack_inplace`` (a pack hook wrote its
    input in place), ``forward_raised`` (a forward's ``raise`` line)."""

    def __init__(self, type_: str, message: str, cause: str = "other"):
        super().__init__(message)
        self.type = type_
        self.message = message
        self.cause = cause
