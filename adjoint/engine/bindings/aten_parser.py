"""``torch.X`` names whose ATen binding takes fewer, or other, arguments than ``F.X`` (checked in
torch 2.13's Python argument parser): ``torch.relu(input)``, ``torch.selu(input)``,
``torch.celu(input, alpha=1.)`` and ``torch.threshold(input, threshold, value)`` take no
``inplace``; ``torch.dropout(input, p, train)`` requires all three, and names the flag ``train``
(``torch.alpha_dropout`` and ``torch.feature_alpha_dropout`` too).

A call is checked against that one signature as python_arg_parser.cpp's ``FunctionSignature::parse``
does, in its order: too many positional arguments ("relu() takes 1 positional argument but 2
were given", "celu() takes from 1 to 2 positional arguments but 3 were given"), then the first
required argument missing (every required one from there on is named, and PyTorch's message puts
the plural the other way round: "missing 1 required positional arguments: \"train\""), then a
keyword it does not take ("got an unexpected keyword argument 'inplace'", or "got multiple values
for argument 'p'" for one also given by position). A call that passes is handed on as ``F.X``'s
arguments (``train`` as ``training``), whose lowering is the same op.
"""

from __future__ import annotations

from adjoint.engine.torch_errors import TorchError

#: name -> ATen's parameters (name, required), in order
ATEN_PARAMS: dict[str, tuple[tuple[str, bool], ...]] = {
    "relu": (("input", True),),
    "selu": (("input", True),),
    "celu": (("input", True), ("alpha", False)),
    "threshold": (("input", True), ("threshold", True), ("value", True)),
    "dropout": (("input", True), ("p", True), ("train", True)),
    "alpha_dropout": (("input", True), ("p", True), ("train", True)),
    "feature_alpha_dropout": (("input", True), ("p", True), ("train", True)),
}

#: name -> {ATen's parameter name: F's}
RENAMED = {name: {"train": "training"} for name in ("dropout", "alpha_dropout", "feature_alpha_dropout")}


def _takes(name: str, params: tuple, given: int) -> str:
    most = len(params)
    least = sum(1 for _, required in params if required)
    if least == most:
        count = f"{most} positional argument{'' if most == 1 else 's'}"
    else:
        count = f"from {least} to {most} positional arguments"
    return f"{name}() takes {count} but {given} {'was' if given == 1 else 'were'} given"


def aten_call(name: str, args: list, kwargs: dict, types=None):
    """``torch.<name>(*args, **kwargs)`` checked against ATen's signature: PyTorch's TypeError, or
    (args, kwargs, types) for ``F.<name>``'s binding."""
    params = ATEN_PARAMS[name]
    names = [n for n, _ in params]
    if len(args) > len(params):
        raise TorchError("TypeError", _takes(name, params, len(args)))
    for i, (n, required) in enumerate(params):
        if i >= len(args) and n not in kwargs and required:
            missing = [m for m, r in params[i:] if r]
            plural = "s" if len(missing) == 1 else ""   # python_arg_parser.cpp's own (inverted) plural
            raise TorchError("TypeError", f"{name}() missing {len(missing)} required positional argument{plural}: "
                                          + ", ".join(f'"{m}"' for m in missing))
    for k in kwargs:
        if k not in names:
            raise TorchError("TypeError", f"{name}() got an unexpected keyword argument '{k}'")
        if names.index(k) < len(args):
            raise TorchError("TypeError", f"{name}() got multiple values for argument '{k}'")
    rename = RENAMED.get(name, {})
    kwargs = {rename.get(k, k): v for k, v in kwargs.items()}
    if types is not None:
        types = (types[0], {rename.get(k, k): t for k, t in dict(types[1]).items()})
    return args, kwargs, types
