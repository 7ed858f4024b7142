"""The saved-tensor additions of contract v3 (section 5) in a hook list.

* ``{saved: NAME, slot: SLOT, pack: EXPR, unpack: EXPR}`` --
  ``NAME.grad_fn._raw_saved_SLOT.register_hooks(pack, unpack)``: hooks on one saved tensor of
  the node that made ``NAME``, registered (and its pack run) as soon as ``NAME`` exists (or
  after the forward with ``when: after_forward``). ``on`` is ``saved``, ``kind``
  ``saved_tensors`` (its calls are ``pack`` / ``unpack``, as a ``saved_tensors`` hook's).
* ``{disable_saved_tensors_hooks: MESSAGE, scope: [...]}`` --
  ``with torch.autograd.graph.disable_saved_tensors_hooks(MESSAGE)`` around the forward (or
  the calls of the modules in ``scope``); entering ``saved_tensors`` hooks inside it is
  PyTorch's RuntimeError(MESSAGE), and so is entering it inside active ``saved_tensors`` hooks.
"""

from __future__ import annotations

from adjoint.format.checks import string
from adjoint.format.errors import ProblemError
from adjoint.format.expr import parse_expression
from adjoint.format.loader import YMap

SAVED_KEYS = ("saved", "slot", "pack", "unpack", "disable_saved_tensors_hooks", "save_on_cpu", "pack_params")
#: the most parameters ``pack_params`` may list (PyTorch calls a pack hook with one argument)
MAX_PACK_PARAMS = 6
SAVED_TARGETS = ("saved", "disable_saved_tensors_hooks", "save_on_cpu")
DISABLE = "disable_saved_tensors_hooks"
SAVE_ON_CPU = "save_on_cpu"


def parse_saved_target(h: YMap, on: str, index: int) -> dict:
    """The target fields of a ``saved:`` or ``disable_saved_tensors_hooks:`` hook."""
    if h.get("kind") is not None:
        raise ProblemError(h.key_loc("kind"), f"a {on}: hook takes no kind:")
    for key in ("returns", "does"):
        if h.get(key) is not None:
            raise ProblemError(h.key_loc(key), f"a {on}: hook runs no {key}: (drop it)"
                               + ("; its pack: and unpack: are what it runs" if on == "saved" else ""))
    for key in ("remove", "removes"):
        if h.get(key) is not None:
            raise ProblemError(h.key_loc(key), f"a {on}: hook has no handle to remove (PyTorch returns none); "
                                               f"drop {key}:")
    if h.get("registers") is not None:
        raise ProblemError(h.key_loc("registers"), f"registers: is taken by tensor and node hooks; registering from "
                                                   f"a {on}: hook is not modelled yet")
    if on == SAVE_ON_CPU:
        return parse_save_on_cpu(h, index)
    if on == DISABLE:
        for key in ("slot", "pack", "unpack", "raises", "when", "pack_params"):
            if h.get(key) is not None:
                raise ProblemError(h.key_loc(key), f"{key}: is not taken by a disable_saved_tensors_hooks: entry "
                                                   "(a with block with one message; scope: says around what)")
        message = string(h.get(DISABLE), f"the disable_saved_tensors_hooks message of hook {index}")
        return {"kind": DISABLE, "target": "", "message": message}
    if h.get("scope") is not None:
        raise ProblemError(h.key_loc("scope"), "scope: is only for saved_tensors: and disable_saved_tensors_hooks: "
                                               "hooks (a saved: hook is on one saved tensor)")
    target = string(h.get("saved"), f"the saved of hook {index}").strip()
    if h.get("slot") is None:
        raise ProblemError(h.loc, f"hook {index} (saved: {target}) needs slot: the saved tensor's name on the node, "
                                  "as in grad_fn._raw_saved_SLOT (self, other, result, ...)")
    slot = string(h.get("slot"), f"the slot of hook {index}").strip()
    if not slot.isidentifier():
        raise ProblemError(h.key_loc("slot"), f"the slot of hook {index} must be a name such as self or result, "
                                              f"not '{slot}'")
    for key in ("pack", "unpack"):
        if h.get(key) is None:
            raise ProblemError(h.loc, f"hook {index} (saved: {target}) needs {key}: an expression of x "
                                      "(register_hooks takes both)")
    pack = parse_expression(h.get("pack"), f"the pack of hook {index}", allow_none=True)
    unpack = parse_expression(h.get("unpack"), f"the unpack of hook {index}", allow_none=True)
    params = _pack_params(h.get("pack_params"), index) if h.get("pack_params") is not None else ("x",)
    return {"kind": "saved_tensors", "target": target, "slot": slot, "pack": pack, "unpack": unpack,
            "pack_params": params}


def _pack_params(node, index: int) -> tuple:
    """``pack_params: [x, b]``: the pack hook's parameters (``lambda x, b: ...``), x first."""
    items = getattr(node, "items", None)
    if not items:
        raise ProblemError(node.loc, f"pack_params of hook {index} takes a list of parameter names, x first, as in "
                                     "[x, b]")
    names = tuple(string(item, f"a parameter of pack_params of hook {index}").strip() for item in items)
    if names[0] != "x" or len(set(names)) != len(names) or not all(n.isidentifier() for n in names) \
            or len(names) > MAX_PACK_PARAMS:
        raise ProblemError(node.loc, f"pack_params of hook {index} lists distinct Python names, x first, at most "
                                     f"{MAX_PACK_PARAMS}, as in [x, b]")
    return names


def parse_save_on_cpu(h: YMap, index: int) -> dict:
    """``{save_on_cpu: {pin_memory: BOOL}, scope: [...]}``: ``with
    torch.autograd.graph.save_on_cpu(pin_memory=...)`` around the forward (or the calls of the
    modules in ``scope``); ``save_on_cpu: {}`` takes PyTorch's default, ``pin_memory=False``."""
    for key in ("slot", "pack", "unpack", "raises", "when"):
        if h.get(key) is not None:
            raise ProblemError(h.key_loc(key), f"{key}: is not taken by a save_on_cpu: entry (PyTorch's own pack and "
                                               "unpack; scope: says around what)")
    body = h.get(SAVE_ON_CPU)
    if not isinstance(body, YMap):
        raise ProblemError(body.loc, f"the save_on_cpu of hook {index} is a mapping of its arguments: "
                                     "save_on_cpu: {} or save_on_cpu: {pin_memory: true}")
    pin = False
    for key, value in body.entries:
        if key.text != "pin_memory":
            raise ProblemError(key.loc, f"save_on_cpu takes pin_memory only, not '{key.text}' (device_type: a "
                                        "CPU run has no other device)")
        text = getattr(value, "text", None)
        if text not in ("true", "false", "True", "False"):
            raise ProblemError(value.loc, "pin_memory is true or false")
        pin = text in ("true", "True")
    return {"kind": SAVE_ON_CPU, "target": "", "pin_memory": pin}


def check_not_saved_keys(h: YMap, on: str) -> None:
    """slot:, and pack:/unpack: at the hook's top level, belong to saved: hooks only."""
    if on == "saved":
        return
    for key in ("slot", "pack", "unpack", "pack_params"):
        if h.get(key) is not None:
            raise ProblemError(h.key_loc(key), f"{key}: is only for saved: hooks"
                               + (" (a saved_tensors: hook has them inside: saved_tensors: {pack: ..., unpack: ...})"
                                  if on == "saved_tensors" else ""))
