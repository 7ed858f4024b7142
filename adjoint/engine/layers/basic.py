"""Linear, the v1 activations, Identity and the containers (Sequential, ModuleList, ModuleDict)."""

from __future__ import annotations

from adjoint.engine.torch_errors import TorchError
from adjoint.engine.bindings import call_function
from adjoint.engine.bindings.core import linear


def linear_forward(c):
    return linear(c.rt, c.args[0], c.params["weight"], c.params.get("bias"), c.module.loc)


def _elementwise(name: str):
    def forward(c):
        if c.arg("inplace", False):
            from adjoint.engine.inplace import call_inplace
            return call_inplace(c.rt, f"{name}_", c.args[0], [], {}, c.module.loc)
        return call_function(c.rt, name, [c.args[0]], {}, c.module.loc)
    forward.__name__ = f"{name}_forward"
    return forward


def identity_forward(c):
    return c.args[0]


def sequential_forward(c):
    x = c.args[0]
    for child in c.module.children:
        x = c.call_child(child, [x], {})
    return x


def module_list_forward(c):
    """ModuleList and ModuleDict define no forward: Module's _forward_unimplemented raises, inside
    _call_impl (after the forward_pre hooks; the always_call hooks still run). Call their items."""
    raise TorchError("NotImplementedError", f'Module [{c.module.type}] is missing the required "forward" function',
                     "python")


module_dict_forward = module_list_forward


FORWARDS = {
    "Linear": linear_forward,
    "ReLU": _elementwise("relu"),
    "Tanh": _elementwise("tanh"),
    "Sigmoid": _elementwise("sigmoid"),
    "Identity": identity_forward,
    "Sequential": sequential_forward,
    "ModuleList": module_list_forward,
    "ModuleDict": module_dict_forward,
}
