"""Hand-written torch references for the ports in tests/pytorch/: one function per problem
file, named after it.

Each function does in real torch (float64) what the PyTorch test it ports does -- the same
modules, the same hooks registered in the same order, the same forward and backward calls
-- with the fixed values of the problem file in place of PyTorch's random ones, and returns
what the hooks were handed in the contract's JSON shape (tests/pytorch/capture.py). For a
file with variants it returns ``{variant: observation}``. They are written from PyTorch's
tests (test/nn/test_module_hooks.py, test/test_autograd.py), never from adjoint's output;
tests/test_pytorch_ports.py compares them with ``adjoint solve``.

The functions live in ref_module_hooks.py (test/nn/test_module_hooks.py) and
ref_autograd.py (test/test_autograd.py); shared helpers in ref_common.py and capture.py.
"""

from ref_autograd import *          # noqa: F401,F403  (every test_* function of the autograd ports)
from ref_module_hooks import *      # noqa: F401,F403  (every test_* function of the module-hook ports)


# ----------------------------------------------------------------------------- saved tensors, completed
# (contract v3 section 5: hooks on one saved tensor, disable_saved_tensors_hooks, nesting, a pack
# hook returning a key). Written from test/test_autograd.py; later definitions of a name replace
# the ones imported above.

import contextlib  # noqa: E402

import torch  # noqa: E402

from capture import Log, error, grads, leaf, observation, saved_read, snap  # noqa: E402


def _inplace_double(x):
    x *= 2
    return x


_SAVED_ORIGINAL_BODIES = {
    "half": (lambda x: 2 * x, lambda x: x / 2),
    "double": (lambda x: 2 * x, lambda x: x),
    "unpack_returns_int": (lambda x: x, lambda x: 1),
    "pack_writes_input": (_inplace_double, lambda x: x / 2),
    "pack_two_params": (lambda x, b: x, lambda x: x),
    "pack_two_params_tuple": (lambda x, b: (x, b), lambda x: x),
}


def _saved_original_with_hooks(get_input):
    """test_saved_variable_packing_unpacking_saved_original_with_hooks' test(get_input, is_leaf):
    y = a * a, hooks on y.grad_fn._raw_saved_self, the read of y.grad_fn._saved_self (its
    value, and for a non-leaf a its grad_fn, a's own), then y.sum().backward()."""
    out = {}
    for variant, (pack_body, unpack_body) in _SAVED_ORIGINAL_BODIES.items():
        log = Log()
        leaves, a = get_input()
        grad_fn = a.grad_fn
        y = a * a
        log.name_nodes(model=y)
        if variant.startswith("pack_two_params"):   # the test's register_hooks(lambda x, b: ..., lambda x: x)
            try:
                y.grad_fn._raw_saved_self.register_hooks(pack_body, unpack_body)
            except TypeError as e:   # "<lambda>() missing 1 required positional argument: 'b'"
                out[variant] = observation(log, error=error(e, "forward", log))
            continue
        pack, unpack = log.saved_tensors(0, pack_body, unpack_body)
        try:
            with log.op("MulBackward0", "model"):
                y.grad_fn._raw_saved_self.register_hooks(pack, unpack)
        except RuntimeError as e:   # "A saved tensor pack hook is modifying its input in place."
            assert variant == "pack_writes_input"
            out[variant] = observation(log, error=error(e, "forward", log))
            continue
        names = dict(leaves, a=a, y=y, model=y)   # the file's names of these tensors
        try:
            saved_self = y.grad_fn._saved_self   # the test's read (print(...) in the int case)
        except TypeError as e:      # "Output of saved tensor unpack_hook expected to be a Tensor"
            assert variant == "unpack_returns_int"
            out[variant] = observation(log, error=error(e, "read", log))
            continue
        reads = {"saved_self": saved_read("y.grad_fn._saved_self", saved_self, names)}
        assert torch.equal(saved_self, {"half": 1, "double": 2}[variant] * a.detach())   # assertEqual(a / 2 * a, ...)
        if "a" not in leaves:
            assert saved_self.grad_fn is grad_fn
        y.sum().backward()
        if "a" in leaves:   # the test asserts a.grad for a leaf: 2 * a (half), 3 * a (double)
            assert torch.allclose(leaves["a"].grad, {"half": 2, "double": 3}[variant] * a.detach())
        out[variant] = observation(log, grads(**leaves), reads=reads)
    return out


def test_saved_variable_packing_unpacking_saved_original_with_hooks__leaf():
    def get_input():
        a = leaf([0.5, -1.5])
        return {"a": a}, a
    return _saved_original_with_hooks(get_input)


def test_saved_variable_packing_unpacking_saved_original_with_hooks__not_leaf():
    def get_input():
        r = leaf([0.5, -1.5])
        return {"r": r}, 1 + r
    return _saved_original_with_hooks(get_input)


def test_setting_default_saved_variable_hooks_twice_should_not_fail():
    log = Log()
    x = leaf([0.5, -1])
    with torch.autograd.graph.saved_tensors_hooks(*log.saved_tensors(0)):
        with torch.autograd.graph.saved_tensors_hooks(*log.saved_tensors(1)):
            pass
    return observation(log, grads(x=x))


def test_disabling_saved_tensor_hooks():
    out = {}
    log = Log()
    with torch.autograd.graph.disable_saved_tensors_hooks("error message"):
        try:
            with torch.autograd.graph.saved_tensors_hooks(*log.saved_tensors(1)):
                pass
        except RuntimeError as e:
            out["disabled_then_hooks"] = observation(log, error=error(e, "forward", log))
    log = Log()
    with torch.autograd.graph.saved_tensors_hooks(*log.saved_tensors(0)):
        try:
            with torch.autograd.graph.disable_saved_tensors_hooks("error message"):
                pass
        except RuntimeError as e:
            out["hooks_then_disabled"] = observation(log, error=error(e, "forward", log))
    assert set(out) == {"disabled_then_hooks", "hooks_then_disabled"}, "PyTorch did not raise"
    return out


def test_disabling_saved_tensor_hooks_nested():
    log = Log()
    with torch.autograd.graph.disable_saved_tensors_hooks("outer"):
        with torch.autograd.graph.disable_saved_tensors_hooks("inner"):
            try:
                with torch.autograd.graph.saved_tensors_hooks(*log.saved_tensors(2)):
                    pass
            except RuntimeError as e:
                return observation(log, error=error(e, "forward", log))
    raise AssertionError("PyTorch did not raise")


def _inc(x):
    x += 1
    return x


def test_pack_hook_with_inplace_modification_should_fail():
    out = {}
    log = Log()
    a = leaf([0.5, -1])
    with torch.autograd.graph.saved_tensors_hooks(*log.saved_tensors(0, _inc)):
        try:   # the op raises while it saves: no output exists, so the pack names no tensor
            with log.op("ExpBackward0", None):
                torch.exp(a)
        except RuntimeError as e:
            out["default_hooks"] = observation(log, error=error(e, "forward", log))
    log = Log()
    a = leaf([0.5, -1])
    y = torch.exp(a)
    try:
        with log.op("ExpBackward0", "model"):
            y.grad_fn._raw_saved_result.register_hooks(*log.saved_tensors(0, _inc))
    except RuntimeError as e:
        out["raw_saved_result"] = observation(log, error=error(e, "forward", log))
    assert set(out) == {"default_hooks", "raw_saved_result"}, "PyTorch did not raise"
    return out


def test_setting_default_saved_variable_hooks_twice_should_use_inner():  # noqa: F811 (now as written)
    log = Log()
    a, b = leaf([0.5, -1]), leaf([2, 0.25])
    with torch.autograd.graph.saved_tensors_hooks(*log.saved_tensors(0, lambda x: 3 * x, lambda x: 3 * x)):
        with torch.autograd.graph.saved_tensors_hooks(*log.saved_tensors(1, lambda x: 5 * x, lambda x: 5 * x)):
            with log.op("MulBackward0", "ym"):
                y = a * a
        with log.op("MulBackward0", "z1"):
            z = b * b
    log.name_nodes(ym=y, z1=z)
    with log.backward_pass(lambda: grads(a=a, b=b)):
        y.sum().backward()
    with log.backward_pass(lambda: grads(a=a, b=b)):
        z.sum().backward()
    assert torch.allclose(a.grad, 2 * 5 * 5 * a.detach()) and torch.allclose(b.grad, 2 * 3 * 3 * b.detach())
    return observation(log, grads(a=a, b=b))


def test_saved_tensor_hooks_custom_error_propagation():  # noqa: F811 (now as written)
    class CustomError(Exception):
        pass

    def pack_hook(x):
        raise CustomError("pack")

    def unpack_hook(x):
        raise CustomError("unpack")

    out = {}
    log = Log()
    a = leaf(1.0)
    with torch.autograd.graph.saved_tensors_hooks(*log.saved_tensors(0, pack_hook)):
        try:   # the op raises while it saves: no output exists, so the pack names no tensor
            with log.op("SinBackward0", None):
                torch.sin(a)
        except CustomError as e:
            out["error_on_pack_hook"] = observation(log, error=error(e, "forward", log))
    log = Log()
    a = leaf(1.0)
    with torch.autograd.graph.saved_tensors_hooks(*log.saved_tensors(0, None, unpack_hook)):
        with log.op("SinBackward0", "model"):
            o = torch.sin(a)
        log.name_nodes(model=o)
        try:
            o.backward()
        except CustomError as e:
            out["error_on_unpack_hook"] = observation(log, error=error(e, "backward", log))
    assert set(out) == {"error_on_pack_hook", "error_on_unpack_hook"}, "PyTorch did not raise"
    return out


_B33 = [[0.5, -1, 2], [0.25, 1.5, -0.5], [1, -2, 0.75]]


def test_tensor_hooks_inplace_multiple_outputs__var_mean():
    log = Log()
    b = leaf(_B33)
    out1, out2 = torch.var_mean(b, dim=0)
    out1.register_hook(log.tensor_hook(0, "out1"))
    out2.register_hook(log.tensor_hook(1, "out2"))
    out1.mul_(2)
    out1.register_hook(log.tensor_hook(2, "out1"))
    (out1 + out2 * 3).sum().backward()
    assert sorted(c["hook"] for c in log.calls) == [0, 1, 2]   # counts == [1, 1, 1]
    return observation(log, grads(b=b))


def test_retains_grad_inplace_multiple_outputs__var_mean():
    b = leaf(_B33)
    var, mean = torch.var_mean(b, dim=0)
    var.retain_grad()
    mean.retain_grad()
    var.mul_(2)
    (var + mean).sum().backward()
    gvar, gmean = var.grad, mean.grad
    a = b.detach().requires_grad_(True)
    var2, mean2 = torch.var_mean(a, dim=0)
    var2.mul_(2)
    gvar_expected, gmean_expected = torch.autograd.grad((var2 + mean2).sum(), inputs=(var2, mean2))
    assert torch.equal(gvar, gvar_expected) and torch.equal(gmean, gmean_expected)
    return observation(Log(), grads(b=b, var=var, mean=mean))


def test_saved_tensor_hooks_custom_function_intermediates():
    class Func(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            intermediate = x.exp()
            ctx.save_for_backward(intermediate.clone())   # the test: .clone().detach_().requires_grad_(True)
            return x.exp()

        @staticmethod
        def backward(ctx, grad_out):
            (intermediate,) = ctx.saved_tensors
            return grad_out * intermediate

    log = Log()
    a = leaf(1.0)
    with torch.autograd.graph.saved_tensors_hooks(*log.saved_tensors(0)):
        with log.op("FuncBackward", "func"):
            out = Func.apply(a)
    log.name_nodes(func=out)
    out.backward()
    return observation(log, grads(a=a))


def test_hook_extra_input():
    import torch.nn as nn

    class MyModule(nn.Module):
        def forward(self, non_tensor, tensor):
            return tensor.clone(), non_tensor

    class Root(nn.Module):   # the problem's root: passes inp on
        def __init__(self):
            super().__init__()
            self.mod = MyModule()

        def forward(self, inp):
            out, _ = self.mod(True, inp)
            return out

    def body(grad_input, grad_output):
        assert grad_input[0] is None and isinstance(grad_input[1], torch.Tensor)
        assert isinstance(grad_output[0], torch.Tensor) and grad_output[1] is None

    root = Root()
    log = Log(root)
    inp = leaf([0.5, -1])
    root.mod.register_full_backward_hook(log.module_hook(0, "full_backward", "mod", fn=body))
    root(inp).sum().backward()
    assert len(log.calls) == 1
    return observation(log, grads(inp=inp))


def test_bw_hook_warning_for_non_tensor_or_tuple():
    import warnings as _warnings

    import torch.nn as nn

    counter = {"forward": 0, "backward": 0}

    def fw_pre_hook(_inputs):
        counter["forward"] += 1

    def fw_hook(_inputs, _outputs):
        counter["forward"] += 1

    def bw_pre_hook(_grad_output):
        counter["backward"] += 1

    def bw_hook(_inputs, _outputs):
        counter["backward"] += 1

    class TestModule(nn.Module):
        def forward(self, dict):
            inp = dict["x"]
            x = torch.nn.functional.softmax(inp, dim=0)
            return {"x": x}

    class Root(nn.Module):   # the problem's root: builds the dict
        def __init__(self):
            super().__init__()
            self.test_module = TestModule()

        def forward(self, x):
            return self.test_module({"x": x})["x"]

    root = Root()
    log = Log(root)
    model = root.test_module
    x = leaf([1, 1])
    model.register_forward_pre_hook(log.module_hook(0, "forward_pre", "test_module", fn=fw_pre_hook))
    model.register_forward_hook(log.module_hook(1, "forward", "test_module", fn=fw_hook))
    model.register_full_backward_pre_hook(log.module_hook(2, "full_backward_pre", "test_module", fn=bw_pre_hook))
    model.register_full_backward_hook(log.module_hook(3, "full_backward", "test_module", fn=bw_hook))
    with _warnings.catch_warnings(record=True) as w:
        _warnings.simplefilter("always")
        y = root(x)
        loss = y.sum()
        loss.backward()
    assert counter == {"forward": 2, "backward": 0} and len(w) == 1
    assert "should be a Tensor or a tuple of Tensors" in str(w[0].message)
    return observation(log, grads(x=x),
                       warnings=[{"category": w[0].category.__name__, "message": str(w[0].message)}])


def test_grad_fn_prehooks_multiple_outputs__var_mean():
    out = {}
    b = leaf(_B33)
    var, mean = torch.var_mean(b, dim=0)
    (var + mean).sum().backward()
    out["no_hook"] = observation(Log(), grads(a=b))
    log = Log()
    a = b.detach().requires_grad_()

    def prehook(grad_output):
        gvar, gmean = grad_output
        return (gvar * 2, gmean * 2)

    var, mean = torch.var_mean(a, dim=0)
    mean.grad_fn.register_prehook(log.node_pre_hook(0, "mean", fn=prehook))
    (var + mean).sum().backward()
    assert len(log.calls) == 1 and torch.allclose(a.grad, b.grad * 2)
    out["prehook"] = observation(log, grads(a=a))
    return out


def test_grad_fn_prehooks_multiple_outputs__custom_function():
    from torch.autograd import Function

    class DoubleMul2(Function):
        @staticmethod
        def forward(ctx, x, a, y):
            ctx.a = a
            return a * x * 2, a, a * y * 2

        @staticmethod
        def backward(ctx, g1, _a, g2):
            return ctx.a * g1 * 2, None, ctx.a * g2 * 2

    def prehook(grad_output):
        g1, ga, g2 = grad_output
        assert ga is None
        return (g1 * 2, None, g2 * 2)

    log = Log()
    a = leaf(_B33)
    b = leaf([[-0.5, 1, 0.25], [2, -1.5, 0.5], [0.75, 1, -2]])
    k = 3
    c, _, d = DoubleMul2.apply(a, k, b)
    c.grad_fn.register_prehook(log.node_pre_hook(0, "c", fn=prehook))
    (c + d).sum().backward()
    assert len(log.calls) == 1
    assert torch.allclose(a.grad, torch.ones(1, dtype=a.dtype) * 4 * k)
    assert torch.allclose(b.grad, torch.ones(1, dtype=b.dtype) * 4 * k)
    return observation(log, grads(a=a, b=b))


# ----------------------------------------------------------------------------- contract v3 ports (ref_portsa.py)

from ref_portsa import *  # noqa: E402,F401,F403  (module-hook, checkpoint and save_on_cpu ports)

# ----------------------------------------------------------------------------- issue 24: second order,
# reentrant backwards, hook bodies that write (test/test_autograd.py)

from ref_autograd2 import *         # noqa: E402,F401,F403


# ----------------------------------------------------------------------------- saved tensors read
# (the read steps: ``{read: y.grad_fn._saved_SLOT, as: NAME}``). Written from test/test_autograd.py.

def test_saved_variable_packing_unpacking_saved_original_with_hooks__not_leaf_double_backward():  # noqa: F811
    """The double-backward case of test_saved_variable_packing_unpacking_saved_original_with_hooks
    for a non-leaf a = 1 + r: identity hooks on y.grad_fn._raw_saved_self of y = a ** 3, the
    create_graph grad, the read of y.grad_fn._saved_self (its grad_fn is a's), the backward."""
    log = Log()
    r = leaf([0.5, -1.5])
    a = 1 + r
    grad_fn = a.grad_fn
    y = a**3
    log.name_nodes(y=y)
    pack, unpack = log.saved_tensors(0)
    with log.op("PowBackward0", "y"):
        y.grad_fn._raw_saved_self.register_hooks(pack, unpack)
    s = torch.sum(y)
    returned = {}
    with log.backward_pass(lambda: grads(r=r), lambda: returned):
        (g,) = torch.autograd.grad(s, (a,), create_graph=True)
        returned["a"] = snap(g)
    saved_self = y.grad_fn._saved_self
    assert saved_self.grad_fn is grad_fn
    reads = {"saved_self": saved_read("y.grad_fn._saved_self", saved_self, {"r": r, "a": a, "y": y, "s": s})}
    with log.backward_pass(lambda: grads(r=r)):
        g.sum().backward()
    return observation(log, grads(r=r), reads=reads)


def test_saved_variable_packing_unpacking_did_not_save_original_with_hooks():  # noqa: F811 (now as written)
    log = Log()
    a = leaf([0.5, -1])
    y = torch.exp(a)
    log.name_nodes(model=y)
    pack, unpack = log.saved_tensors(0)
    with log.op("ExpBackward0", "model"):
        y.grad_fn._raw_saved_result.register_hooks(pack, unpack)
    saved_result = y.grad_fn._saved_result
    assert torch.equal(y, saved_result)
    assert y.grad_fn is saved_result.grad_fn
    reads = {"saved_result": saved_read("y.grad_fn._saved_result", saved_result, {"a": a, "model": y, "y": y})}
    y.sum().backward()
    assert torch.allclose(a.grad, y.detach())
    return observation(log, grads(a=a), reads=reads)


def test_saved_variable_packing_unpacking_did_not_save_original_with_default_hooks():  # noqa: F811 (now as written)
    log = Log()
    a = leaf([0.5, -1])
    pack, unpack = log.saved_tensors(0)
    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        with log.op("ExpBackward0", "model"):
            y = torch.exp(a)
        loss = y.sum()
        log.name_nodes(model=y)
        saved_result = y.grad_fn._saved_result
        assert torch.equal(y, saved_result)
        reads = {"saved_result": saved_read("y.grad_fn._saved_result", saved_result,
                                            {"a": a, "model": y, "y": y, "loss": loss})}
        loss.backward()
    return observation(log, grads(a=a), reads=reads)


def test_saved_variable_packing_unpacking_saved_original_with_default_hooks():  # noqa: F811 (now as written)
    """Its blocks as variants; every block but the first reads y.grad_fn._saved_self and
    _saved_other before the backward (equal to a; 2 * a with pack 2x, unpack x)."""
    out = {}
    bodies = {"pack_twice": (None, None), "identity": (None, None), "double_half": (lambda x: 2 * x, lambda x: x / 2),
              "double": (lambda x: 2 * x, None)}
    for variant in ("pack_twice", "identity", "double_half", "double", "no_hooks"):
        log = Log()
        a = leaf([0.5, -1.5])
        hooks = contextlib.nullcontext() if variant == "no_hooks" else \
            torch.autograd.graph.saved_tensors_hooks(*log.saved_tensors(0, *bodies[variant]))
        with hooks:
            with log.op("MulBackward0", "model"):
                y = a * a
            loss = y.sum()
            log.name_nodes(model=y)
            if variant == "pack_twice":
                out[variant] = observation(log, grads(a=a))
                continue
            names = {"a": a, "model": y, "y": y, "loss": loss}
            saved_self, saved_other = y.grad_fn._saved_self, y.grad_fn._saved_other
            factor = 2 if variant == "double" else 1
            assert torch.equal(factor * a.detach(), saved_self) and torch.equal(factor * a.detach(), saved_other)
            reads = {"saved_self": saved_read("y.grad_fn._saved_self", saved_self, names),
                     "saved_other": saved_read("y.grad_fn._saved_other", saved_other, names)}
            loss.backward()
        out[variant] = observation(log, grads(a=a), reads=reads)
    return out


def test_saving_variable_to_disk():  # noqa: F811 (now as written)
    log = Log()
    disk = []   # the temporary directory; a key is the index of a saved tensor

    def pack_body(x):
        disk.append(x)
        return len(disk) - 1

    def unpack_body(name):
        return disk[name]

    with torch.autograd.graph.saved_tensors_hooks(*log.saved_tensors(0, pack_body, unpack_body)):
        a = leaf([1, 1, 1, 1, 1])
        with log.op("MulBackward0", "model"):
            y = a * a
        log.name_nodes(model=y)
        loss = y.sum()
        saved_self = y.grad_fn._saved_self
        assert torch.equal(a, saved_self)
        reads = {"saved_self": saved_read("y.grad_fn._saved_self", saved_self, {"a": a, "model": y, "y": y,
                                                                                 "loss": loss})}
        loss.backward()
    assert torch.equal(a.grad, 2 * a.detach())
    return observation(log, grads(a=a), reads=reads)


def _graph_save_on_cpu(dtype):
    """TestAutograd.test_graph_save_on_cpu's test(get_input, cuda=False, pin_memory) for a dense
    input of ``dtype``: y = a * a under save_on_cpu(pin_memory), the reads of
    y.grad_fn._saved_self / _saved_other (value, dtype, layout), y.sum().backward()."""
    out = {}
    for variant, pin_memory in (("pin_memory_true", True), ("pin_memory_false", False)):
        log = Log()
        with torch.autograd.graph.save_on_cpu(pin_memory):
            a = torch.tensor([0.5, -1.5, 2, 0.25, -0.75], dtype=dtype, requires_grad=True)
            y = a * a
            saved_self, saved_other = y.grad_fn._saved_self, y.grad_fn._saved_other
            assert torch.equal(a, saved_self) and torch.equal(a, saved_other)
            assert a.dtype == saved_self.dtype and a.layout == saved_self.layout == torch.strided
            names = {"a": a, "model": y, "y": y}
            reads = {"saved_self": saved_read("y.grad_fn._saved_self", saved_self, names),
                     "saved_other": saved_read("y.grad_fn._saved_other", saved_other, names)}
            y.sum().backward()
            assert torch.equal(a.grad, 2 * a)
        out[variant] = observation(log, grads(a=a), reads=reads)
    return out


def test_graph_save_on_cpu():  # noqa: F811 (the float64 case, with its reads)
    return _graph_save_on_cpu(torch.float64)


def test_graph_save_on_cpu__float32():
    return _graph_save_on_cpu(torch.float32)


# ----------------------------------------------------------------------------- the ports once "Not built yet"

import ref_notbuilt  # noqa: E402  (tests/pytorch/ref_notbuilt.py: its test_* functions, as names of this module)

globals().update({k: v for k, v in vars(ref_notbuilt).items() if k.startswith("test_")})

# ----------------------------------------------------------------------------- ports upgraded to "as written"
# (hook-dict sizes, ...): tests/pytorch/ref_portsmisc.py; its definitions replace the ones above.

from ref_portsmisc import *  # noqa: E402,F401,F403
