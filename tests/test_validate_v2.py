"""The v2 keys of problem files (adjoint/validate*.py): what each becomes in the records, what
is refused and how, numbers and names that must not slip through, and every mistake of a
file reported at once. Locations are counted by hand in the YAML shown."""

from fractions import Fraction

import pytest
from click.testing import CliRunner

import adjoint
from adjoint.cli import main
from adjoint.format.errors import MAX_REPORTED, ProblemError, ProblemErrors

X = "name: t\ninputs:\n  x: {value: [[1, 2]], requires_grad: true}\n"


def ok(text: str):
    return adjoint.loads(text, name="f.yaml")


def lines(text: str) -> list[str]:
    with pytest.raises(ProblemError) as info:
        adjoint.loads(text, name="f.yaml")
    return info.value.line().split("\n")


def one(text: str) -> str:
    out = lines(text)
    assert len(out) == 1, out
    return out[0]


# ----------------------------------------------------------------------------- modules

def test_args_are_read_with_defaults_filled_in():
    m = ok(X + "init: {seed: 0}\nmodel: {type: Conv1d, args: {in_channels: 2, out_channels: 4, kernel_size: 3}}\n").model
    assert dict(m.args) == {"in_channels": 2, "out_channels": 4, "kernel_size": (3,), "stride": (1,), "padding": (0,),
                            "dilation": (1,), "groups": 1, "bias": True, "padding_mode": "zeros"}
    bn = ok(X + "model: {type: BatchNorm1d, args: {num_features: 2, eps: 0.001, momentum: null}, "
                "params: {weight: [1, 1], bias: [0, 0]}}\n").model
    assert bn.arg("eps") == Fraction(1, 1000) and bn.arg("momentum") is None


def test_unknown_argument_gets_a_suggestion_from_the_type():
    assert one(X + "model: {type: Linear, args: {in_feature: 2, out_features: 1}}\n") == \
        "f.yaml:4:30: unknown argument 'in_feature' of Linear; did you mean 'in_features'? (its arguments: " \
        "in_features, out_features, bias)"


def test_argument_of_the_wrong_type():
    assert one(X + "model: {type: Linear, args: {in_features: 2.5, out_features: 1}}\n") == \
        "f.yaml:4:43: argument 'in_features' of Linear must be an integer, not a number"
    assert one(X + "model: {type: GELU, args: {approximate: fast}}\n") == \
        "f.yaml:4:41: argument 'approximate' of GELU 'fast' is not one of none, tanh"


def test_arguments_a_file_does_not_set_say_why():
    out = lines(X + "model: {type: CrossEntropyLoss, args: {weight: [1, 2], size_average: true, dtype: float64}}\n")
    assert out == [
        "f.yaml:4:40: 'weight' is a tensor, which PyTorch keeps as a buffer: give it under buffers: {weight: [...]}",
        "f.yaml:4:56: 'size_average' is not set per module: it is deprecated in PyTorch; use reduction",
        "f.yaml:4:76: 'dtype' is not set per module: the problem's top-level dtype: sets it for every module (a "
        "complex parameter has its own: params: {weight: {value: ..., imag: ..., dtype: complex128}})"]


def test_required_arguments_and_torchs_refusals():
    assert one(X + "model: {type: Conv2d, args: {kernel_size: 3}}\n") == \
        "f.yaml:4:29: a Conv2d needs the arguments in_channels, out_channels; give args: {in_channels: ..., " \
        "out_channels: ...}"
    # a constructor's own refusal of its values is PyTorch's error, the answer: tests/test_constructor_errors.py


def test_parameters_are_checked_against_the_type():
    assert one(X + "init: {seed: 0}\nmodel: {type: LayerNorm, args: {normalized_shape: 2}, params: {wieght: [1, 1]}}"
               "\n") == "f.yaml:5:64: 'wieght' is not a parameter of this LayerNorm; did you mean 'weight'? (its " \
                        "parameters: weight, bias)"
    assert one(X + "model: {type: LayerNorm, args: {normalized_shape: 2}, params: {weight: [1], bias: [0, 0]}}\n") == \
        "f.yaml:4:72: parameter 'weight' has shape [1] but this LayerNorm (normalized_shape=(2,)) has [2]"


def test_missing_parameters_need_values_or_init():
    # a Linear's bias is drawn at random in PyTorch: the file must give it (or init:)
    assert one(X + "model: {type: Linear, args: {in_features: 2, out_features: 1}, params: {weight: [[1, 1]]}}\n") == \
        "f.yaml:4:8: module 'model' (Linear) has no values for bias; give them under params: or add a top-level " \
        "init: {seed: 0} to generate them"
    # a LayerNorm's is zeros in any freshly built module: left out, it is that
    m = ok(X + "model: {type: LayerNorm, args: {normalized_shape: 2}, params: {weight: [2, 3]}}\n").model
    assert [(p.name, p.value.items, p.requires_grad) for p in m.params] == [
        ("weight", (2, 3), True), ("bias", (0, 0), True)]


def test_buffers_given_defaulted_and_typed():
    m = ok(X + "init: {seed: 0}\nmodel: {type: BatchNorm1d, args: {num_features: 2}, buffers: {running_var: [2, 3], "
               "num_batches_tracked: 4}}\n").model
    assert [(b.name, b.value.items, b.dtype, b.requires_grad) for b in m.buffers] == [
        ("running_mean", (0, 0), None, False), ("running_var", (2, 3), None, False),
        ("num_batches_tracked", (4,), "int64", False)]
    assert one(X + "init: {seed: 0}\nmodel: {type: BatchNorm1d, args: {num_features: 2}, buffers: {running_mean: "
                   "[1]}}\n") == "f.yaml:5:77: buffer 'running_mean' has shape [1] but this BatchNorm1d " \
                                 "(num_features=2) has [2]"
    assert one(X + "init: {seed: 0}\nmodel: {type: BatchNorm1d, args: {num_features: 2}, buffers: "
                   "{num_batches_tracked: 0.5}}\n") == \
        "f.yaml:5:84: the int64 tensor 'num_batches_tracked' holds 1/2 at element []; int64 tensors hold integers"


def test_custom_module_buffers():
    m = ok(X + "model:\n  buffers: {scale: [2]}\n  forward: x * scale\n").model
    assert [(b.name, b.value.items, b.requires_grad) for b in m.buffers] == [("scale", (2,), False)]


def test_training_is_inherited_and_freezing_reaches_children():
    model = ok(X + "model:\n  training: false\n  requires_grad: false\n  params: {w: [1]}\n  children:\n"
                   "    a: {type: Linear, params: {weight: [[1, 2]], bias: [0]}}\n"
                   "    b: {type: Dropout, training: true, mask: [[1, 0]]}\n  forward: b(a(x)) * w\n").model
    assert [(m.label, m.training) for m in model.walk()] == [("model", False), ("a", False), ("b", True)]
    assert [(p.name, p.requires_grad) for m in model.walk() for p in m.params] == \
        [("w", False), ("a.weight", False), ("a.bias", False)]
    assert one(X + "model:\n  requires_grad: false\n  params: {w: {value: [1], requires_grad: true}}\n  forward: x * w"
                   "\n") == "f.yaml:6:43: parameter 'w' is in a module with requires_grad: false, which freezes it; " \
                            "drop requires_grad: true"


def test_inputs_with_defaults():
    m = ok(X + "model:\n  inputs: [x, {scale: 1}, {mode: sum}, {eps: 0.5}, {flag: null}]\n  forward: x * scale\n").model
    assert m.inputs == ("x", "scale", "mode", "eps", "flag")
    assert m.input_defaults == (("scale", 1), ("mode", "sum"), ("eps", Fraction(1, 2)), ("flag", None))
    assert one(X + "model:\n  inputs: [{scale: 1}, x]\n  forward: x * scale\n") == \
        "f.yaml:5:24: input 'x' has no default but follows one that has: Python raises 'parameter without a default " \
        "follows parameter with a default'"


def test_dropout_mask():
    assert ok(X + "model: {type: Dropout, mask: [[1, 0]]}\n").model.mask.items == (1, 0)
    assert ok(X + "model: {type: Dropout, training: false}\n").model.mask is None
    assert one(X + "model: {type: Dropout}\n") == \
        "f.yaml:4:8: module 'model' is a Dropout in training mode, which keeps elements at random; give mask: [...] " \
        "(1 keeps an element, 0 drops it) or training: false"
    assert one(X + "model: {type: Dropout, mask: [[1, 2]]}\n") == \
        "f.yaml:4:30: the mask of module 'model' holds 2; a keep-mask holds 0 (dropped) and 1 (kept)"
    assert one(X + "model: {type: Dropout, training: false, mask: [1]}\n") == \
        "f.yaml:4:41: module 'model' is in eval mode, where Dropout passes its input through; drop mask:"


def test_module_list_children_and_paths():
    for children in ("\n        - {type: ReLU}\n        - {type: Tanh}", " {0: {type: ReLU}, 1: {type: Tanh}}"):
        model = ok(X + "model:\n  children:\n    layers:\n      type: ModuleList\n      children:" + children +
                   "\n  forward: layers[1](layers[0](x))\n").model
        assert [(m.path, m.name, m.type, m.is_list) for m in model.walk()] == [
            ("", "model", None, False), ("layers", "layers", "ModuleList", True),
            ("layers.0", "0", "ReLU", False), ("layers.1", "1", "Tanh", False)]
    assert one(X + "model:\n  children:\n    layers: {type: ModuleList, children: {0: {type: ReLU}, 2: {type: Tanh}}}"
                   "\n  forward: x\n") == "f.yaml:6:60: the children of a ModuleList are named 0, 1, ... in order; " \
                                          "this one should be 1, not '2' (or give them as a YAML list)"
    assert one(X + "model: {type: ModuleList, children: [{type: ReLU}]}\n") == \
        "f.yaml:4:8: the root module cannot be a ModuleList: a ModuleList has no forward; give the root a forward " \
        "that calls layers[0](x), ..."


def test_sequential_children_as_in_v1_or_as_a_list():
    v1 = ok(X + "model: {type: Sequential, children: {0: {type: ReLU}, f: {type: Tanh}}}\n").model
    listed = ok(X + "model: {type: Sequential, children: [{type: ReLU}, {type: Tanh}]}\n").model
    assert [c.path for c in v1.children] == ["0", "f"] and [c.path for c in listed.children] == ["0", "1"]


def test_module_types_torch_has_but_adjoint_does_not_model():
    assert one(X + "model: {type: LocalResponseNorm}\n").startswith(
        "f.yaml:4:15: 'LocalResponseNorm' is a torch.nn module adjoint does not model yet (built-in types: Linear, ReLU,")
    assert one(X + "model: {type: Conv3D}\n").startswith(
        "f.yaml:4:15: unknown module type 'Conv3D'; did you mean 'Conv3d'? (built-in types: Linear,")


def test_a_forward_may_not_reach_inside_a_child():
    assert one(X + "model:\n  children:\n    enc: {children: {block: {type: ReLU}}, forward: block(x)}\n"
                   "  forward: enc.block(x)\n") == \
        "f.yaml:7:12: 'enc.block(x)' reaches inside the child module 'enc', which is not supported; call a child " \
        "from its parent's forward (give 'enc' a forward that does this, and call it)"


# ----------------------------------------------------------------------------- tensors

def test_int64_inputs_and_targets():
    p = ok(X + "targets:\n  t: {value: [1, 0], dtype: int64}\nmodel: {type: ReLU}\n")
    assert p.targets[0].dtype == "int64" and p.targets[0].value.items == (1, 0)
    # PyTorch's errors making an input (requires_grad, an element beyond int64) are answers, not refusals
    p = ok("name: t\ninputs:\n  x: {value: [1], dtype: int64, requires_grad: true}\nmodel: {type: ReLU}\n")
    assert p.variants[0].inputs[0].dtype == "int64" and p.variants[0].inputs[0].requires_grad
    p = ok("name: t\ninputs:\n  x: {value: [9223372036854775808], dtype: int64}\nmodel: {type: ReLU}\n")
    assert p.variants[0].inputs[0].value.items == (9223372036854775808,)
    assert one("name: t\ninputs:\n  x: {value: [1, 2.5], dtype: int64}\nmodel: {type: ReLU}\n") == \
        "f.yaml:3:6: the int64 tensor 'x' holds 5/2 at element [1]; int64 tensors hold integers"
    assert one("name: t\ninputs:\n  x: [1]\nmodel:\n  buffers: {n: {value: [9223372036854775808], dtype: int64}}\n"
               "  forward: x\n") == \
        "f.yaml:5:16: the int64 tensor 'n' holds 9223372036854775808 at element [0], beyond int64: PyTorch raises " \
        "ValueError 'Overflow when unpacking long long' (a buffer's, not modelled; an input's or a target's is answered)"


NUMBERS = [
    ("[1e999999999]", "input 'x': exponent 999999999 is beyond what a float64 can hold (the largest is about 1.8e308)"),
    ("[1e-99999999]", "input 'x': exponent -99999999 is below what a float64 can hold: it would round to 0 (the "
                      "smallest float64 is about 4.9e-324)"),
    ("['1e-100000']", "input 'x': exponent -100000 is below what a float64 can hold: it would round to 0 (the "
                      "smallest float64 is about 4.9e-324)"),
    ("[2e308]", "input 'x': '2e308' is beyond what a float64 can hold (the largest is about 1.8e308)"),
    ("[1_000]", "input 'x': '1_000': write numbers without '_' (1000); YAML readers disagree on what 1_000 means"),
    ("[017]", "input 'x': '017': an integer with a leading zero is octal to YAML 1.1 and decimal to YAML 1.2; write "
              "17 without the zero (or the value you mean)"),
    ("[NaN]", "input 'x': 'NaN' is not a finite number; tensors here hold numbers, fractions like \"1/4\", symbol "
              "names or -inf / inf"),
    ("['٣']", "input 'x': '٣' uses digits other than the ASCII 0-9; write numbers with 0-9"),
    ("['３']", "input 'x': '３' uses digits other than the ASCII 0-9; write numbers with 0-9"),
    ("['1/0']", "input 'x': '1/0' divides by zero; write a finite number"),
]


@pytest.mark.parametrize("literal,message", NUMBERS, ids=[n[0] for n in NUMBERS])
def test_numbers_refused_in_bounded_time(literal, message):
    assert one(f"name: t\ninputs:\n  x: {literal}\nmodel: {{type: ReLU}}\n") == f"f.yaml:3:7: {message}"


def test_huge_exponents_everywhere():
    out = lines("name: t\ninputs:\n  x: {value: [1], scale: 1e999999999}\nsymbols: {w: 1e-99999999}\n"
                "backward: {grad_output: [1e400]}\nmodel: {forward: 'x * 1e999999999'}\n")
    assert out == [
        "f.yaml:3:26: the scale of input 'x': exponent 999999999 is beyond what a float64 can hold (the largest is "
        "about 1.8e308)",
        "f.yaml:4:14: symbol 'w': exponent -99999999 is below what a float64 can hold: it would round to 0 (the "
        "smallest float64 is about 4.9e-324)",
        "f.yaml:5:26: backward.grad_output: exponent 400 is beyond what a float64 can hold (the largest is about "
        "1.8e308)",
        "f.yaml:6:23: exponent 999999999 is beyond what a float64 can hold (the largest is about 1.8e308)"]


def test_denormals_of_the_files_dtype():
    assert one("name: t\ninputs:\n  x: [1, 1e-40]\nmodel: {type: ReLU}\n") == \
        "f.yaml:3:6: the literal of 'x' has 1e-40 at element [1], below float32's smallest normal number (about " \
        "1.2e-38): PyTorch holds a denormal or 0 there; use larger values or dtype: float64"
    assert ok("name: t\ndtype: float64\ninputs:\n  x: [1, 1e-40]\nmodel: {type: ReLU}\n").variants[0].inputs[0]
    assert one("name: t\ninputs:\n  x: [w]\nsymbols: {w: 1e-40}\nmodel: {type: ReLU}\n") == \
        "f.yaml:4:14: symbol 'w' is 1e-40, below float32's smallest normal number (about 1.2e-38): PyTorch holds a " \
        "denormal or 0; use a larger value"


SYMBOLS = [
    ("None", "'None' cannot name a free symbol: SymPy or Python gives it a meaning; use another name, e.g. 'None0'"),
    ("'True'", "'True' cannot name a free symbol: SymPy or Python gives it a meaning; use another name, e.g. 'True0'"),
    ("E", "'E' cannot name a free symbol: SymPy or Python gives it a meaning; use another name, e.g. 'E0'"),
    ("pi", "'pi' cannot name a free symbol: SymPy or Python gives it a meaning; use another name, e.g. 'pi0'"),
    ("oo", "'oo' cannot name a free symbol: SymPy or Python gives it a meaning; use another name, e.g. 'oo0'"),
    ("lambda", "'lambda' cannot name a free symbol: SymPy or Python gives it a meaning; use another name, e.g. "
               "'lambda0'"),
    ("_", "'_' starts with '_'; symbol names start with a letter"),
    ("__import__", "'__import__' starts with '_'; symbol names start with a letter"),
    ("ｗ０", "'ｗ０' looks like 'w0' but is written with other Unicode characters; write plain ASCII"),
    ("wé", "'wé' is not a plain ASCII name; symbol names use the letters A-Z, a-z, digits and _"),
]


@pytest.mark.parametrize("element,message", SYMBOLS, ids=[s[0] for s in SYMBOLS])
def test_free_symbol_names(element, message):
    text = f"name: t\ninputs:\n  x: [{element}]\nmodel: {{type: ReLU}}\n"
    if element == "None":   # YAML reads a bare None as a string; null would be the empty value
        text = text.replace("[None]", "['None']")
    assert one(text) == f"f.yaml:3:7: input 'x': {message}"


def test_plain_symbols_still_work():
    assert ok("name: t\ninputs:\n  x: [w0, W1, y_2]\nmodel: {type: ReLU}\n").free_symbols() == ["W1", "w0", "y_2"]
    assert one("name: t\ninputs:\n  x: [w]\nsymbols: {E: 1}\nmodel: {type: ReLU}\n") == \
        "f.yaml:4:11: 'E' cannot name a free symbol: SymPy or Python gives it a meaning; use another name, e.g. 'E0'"


def test_names_ending_in_a_newline_are_refused():
    out = lines('name: "t\\n"\ninputs:\n  "x\\n": [1]\nmodel:\n  children: {"c\\n": {type: ReLU}}\n  forward: x\n'
                'variants:\n  "v\\n": {}\n')
    assert out == ["f.yaml:1:7: name 't\\n' must match [a-z0-9_-]+ (lower case, digits, _ and -)",
                   "f.yaml:3:3: 'x\\n' is not a valid tensor name; use letters, digits and _",
                   "f.yaml:5:14: 'c\\n' is not a valid module name; use letters, digits and _"]


def test_lone_surrogates_are_refused():
    assert one('name: t\ndescription: "a \\ud800"\ninputs:\n  x: [1]\nmodel: {type: ReLU}\n') == \
        "f.yaml:2:14: a string holds the lone surrogate \\ud800, which is not a character; write the character itself"


# ----------------------------------------------------------------------------- hooks

def test_every_v2_hook_key_lands_in_its_field():
    hooks = ok(X + "model: {type: Linear, params: {weight: [[1, 2]], bias: [0]}}\nhooks:\n"
                   "  - {global: forward, with_kwargs: true, always_call: true}\n"
                   "  - {multi_grad: [x, weight], mode: any}\n"
                   "  - {saved_tensors: {pack: x * 2, unpack: x / 2}, scope: [model]}\n"
                   "  - {saved_tensors: {pack: x, unpack: x}}\n"
                   "  - {tensor: weight, kind: post_accumulate_grad}\n"
                   "  - {module: model, kind: forward_pre, prepend: true, with_kwargs: true, raises: boom, "
                   "removes: [0, 1]}\n"
                   "  - {node: x, kind: pre}\n").variants[0].hooks
    assert [(h.on, h.target, h.kind, h.label) for h in hooks] == [
        ("global", "", "forward", "forward@global"), ("multi_grad", "x,weight", "multi_grad", "multi_grad@x,weight"),
        ("saved_tensors", "model", "saved_tensors", "saved_tensors@model"),
        ("saved_tensors", "", "saved_tensors", "saved_tensors"),
        ("tensor", "weight", "post_accumulate_grad", "post_accumulate_grad@weight"),
        ("module", "model", "forward_pre", "forward_pre@model"), ("node", "x", "pre", "pre@x")]
    assert (hooks[0].with_kwargs, hooks[0].always_call, hooks[0].prepend) == (True, True, False)
    assert (hooks[1].tensors, hooks[1].mode) == (("x", "weight"), "any")
    assert (adjoint.format.syntax.to_source(hooks[2].pack), adjoint.format.syntax.to_source(hooks[2].unpack), hooks[2].scope) == \
        ("x * 2", "x / 2", ("model",))
    assert hooks[3].scope is None
    assert (hooks[5].prepend, hooks[5].with_kwargs, hooks[5].raises, hooks[5].removes) == (True, True, "boom", (0, 1))


HOOK_REFUSALS = [
    ("{module: model, tensor: x, kind: forward}", "6:5: hook 0 needs exactly one of module:, tensor:, node:, global:, "
                                                  "multi_grad:, saved_tensors:, saved:, disable_saved_tensors_hooks:, save_on_cpu: (it has module, tensor)"),
    ("{global: forward_pre, with_kwargs: true}", "6:27: with_kwargs: is taken by forward and forward_pre module hooks "
                                                 "(global hooks: forward only)"),
    ("{module: model, kind: backward, prepend: true}", "6:37: prepend: is taken by module hooks only "
                                                       "(register_*_hook(..., prepend=True)), not by the legacy "
                                                       "backward hook, global, tensor or node hooks"),
    ("{tensor: x, always_call: true}", "6:17: always_call: is taken by forward hooks only "
                                       "(register_forward_hook(..., always_call=True))"),
    ("{module: model, kind: forward_pre, always_call: true}", "6:40: always_call: is taken by forward hooks only "
                                                              "(register_forward_hook(..., always_call=True))"),
    ("{saved_tensors: {pack: x, unpack: x}, returns: x}", "6:43: a saved_tensors hook returns what its pack: and "
                                                          "unpack: give; drop returns:"),
    ("{saved_tensors: {pack: x}}", "6:21: saved_tensors of hook 0 is missing the required key 'unpack'"),
    ("{global: forward, kind: forward}", "6:23: a global hook takes no kind: (global: names it)"),
    ("{tensor: x, removes: [1]}", "6:27: removes of hook 0: there is no hook 1; the hooks of the same list are "
                                  "numbered 0 to 0"),
    ("{tensor: x, returns: grad * 2, raises: no}", "6:17: a hook that raises never returns; drop returns: or raises:"),
    ("{tensor: x, mode: any}", "6:17: mode: is only for multi_grad: hooks"),
    ("{tensor: x, kind: retain_grad, raises: r}", "6:36: retain_grad runs no code, so it cannot raise; drop raises: "
                                                  "or use kind: hook"),
]


@pytest.mark.parametrize("hook,message", HOOK_REFUSALS, ids=[h[0] for h in HOOK_REFUSALS])
def test_hook_refusals(hook, message):
    text = X + f"model: {{type: Linear, params: {{weight: [[1, 2]], bias: [0]}}}}\nhooks:\n  - {hook}\n"
    assert one(text) == f"f.yaml:{message}"


def test_hooks_the_whole_list_shows_wrong():
    base = X + "model: {type: Linear, params: {weight: [[1, 2]], bias: [0]}}\nhooks:\n"
    assert one(base + "  - {tensor: x, kind: retain_grad}\n  - {tensor: x, removes: [0]}\n") == \
        "f.yaml:7:5: hook 1 removes hook 0, a retain_grad hook, which has no handle"
    ok(base + "  - {global: full_backward}\n  - {global: backward}\n")   # well formed: PyTorch's error is the answer
    assert one(base + "  - {module: lin, kind: forward}\n") == \
        "f.yaml:6:5: hook target module 'lin' does not exist; modules: model"
    assert one(base + "  - {saved_tensors: {pack: x, unpack: x}, scope: [enc]}\n") == \
        "f.yaml:6:5: the scope of hook 0 names 'enc', which is not a module; modules: model"


# ----------------------------------------------------------------------------- steps and variants

def test_steps_every_form():
    p = ok(X + "model: {type: Linear, params: {weight: [[1, 2]], bias: [0]}}\nhooks:\n  - {tensor: x}\n"
               "  - {module: model, kind: forward}\nbackward: {method: grad, inputs: [x]}\nsteps:\n  - forward\n"
               "  - {backward: {retain_graph: true}}\n  - {register: [1]}\n  - zero_grad\n  - {step: {lr: 0.1}}\n"
               "  - {forward: {inputs: {x: [[3, 4]]}}}\n  - backward\n  - {remove: [0]}\n")
    steps = p.variants[0].steps
    assert [s.kind for s in steps] == ["forward", "backward", "register", "zero_grad", "step", "forward", "backward",
                                       "remove"]
    assert steps[1].backward.retain_graph and steps[1].backward.method == "backward"
    assert steps[6].backward == p.variants[0].backward and steps[6].backward.method == "grad"
    assert steps[2].hooks == (1,) and steps[7].hooks == (0,) and steps[4].lr == Fraction(1, 10)
    assert [(d.name, d.value.items) for d in steps[5].inputs] == [("x", (3, 4))]


def test_step_refusals_are_all_reported():
    out = lines(X + "model: {type: ReLU}\nsteps:\n  - forwards\n  - {step: {}}\n  - {forward: {inputs: {z: [1]}}}\n"
                    "  - step\n  - {zero_grad: 1}\n")
    assert out == [
        "f.yaml:6:5: step 0 of steps: 'forwards' is not a step; steps are forward, backward, register, remove, "
        "zero_grad, step, registered, read, clip_grad_norm, clip_grad_value",
        "f.yaml:7:12: the step of step 1 of steps is missing the required key 'lr'",
        "f.yaml:8:25: step 2 of steps sets input 'z', which the problem does not declare; a step can only change "
        "declared inputs (x)",
        "f.yaml:9:5: step 3 of steps: write {step: {lr: 0.1}} with the learning rate",
        "f.yaml:10:17: step 4 of steps: zero_grad takes nothing (every .grad is set to None), or "
        "{set_to_none: false, leaves: [NAME, ...]}"]


def test_step_hook_indices_are_checked_per_variant():
    text = X + "model: {type: ReLU}\nhooks:\n  - {tensor: x}\nsteps: [forward, {register: [0]}, backward]\n" \
               "variants:\n  keeps: {description: the top-level hook}\n  empty: {hooks: []}\n" \
               "  own: {hooks: [], steps: [forward, backward]}\n"
    assert one(text) == "f.yaml:7:18: step 1 of steps names hook 0, but variant 'empty' has no hooks"


def test_a_variants_steps_replace_the_top_levels_and_its_description_is_kept():
    p = ok(X + "model: {type: ReLU}\nsteps: [forward, backward, zero_grad]\nvariants:\n  a: {description: first}\n"
               "  b: {steps: [forward, backward]}\n  c:\n")
    assert [(v.name, v.description, [s.kind for s in v.steps]) for v in p.variants] == [
        ("a", "first", ["forward", "backward", "zero_grad"]), ("b", "", ["forward", "backward"]),
        ("c", "", ["forward", "backward", "zero_grad"])]
    assert ok(X + "model: {type: ReLU}\n").variants[0].steps is None


def test_init_seed():
    assert ok(X + "init: {seed: 12}\nmodel: {type: ReLU}\n").init_seed == 12
    assert one(X + "init: {seed: -1}\nmodel: {type: ReLU}\n") == "f.yaml:4:14: the seed of init must be at least 0, " \
                                                                  "not -1"


# ----------------------------------------------------------------------------- every mistake at once

THREE = X.replace("requires_grad: true", "requires_grad: maybe") + \
    "model:\n  children:\n    a: {type: Linear, args: {in_features: 2, out_feature: 1}}\n    b: {type: Tanh}\n" \
    "  forward: b(a(x)) % 2\n"


def test_three_mistakes_are_three_lines_in_file_order():
    with pytest.raises(ProblemErrors) as info:
        adjoint.loads(THREE, name="f.yaml")
    err = info.value
    assert isinstance(err, ProblemError)
    assert err.line().split("\n") == [
        "f.yaml:3:39: requires_grad of input 'x' must be true or false, not a string",
        "f.yaml:6:46: unknown argument 'out_feature' of Linear; did you mean 'out_features'? (its arguments: "
        "in_features, out_features, bias)",
        "f.yaml:8:12: operator '%' is not allowed; use + - * / ** @"]
    assert [(e.loc.line, e.loc.col) for e in err.errors] == [(3, 39), (6, 46), (8, 12)]
    assert (err.loc, err.message) == (err.errors[0].loc, err.errors[0].message)


def test_one_mistake_is_still_one_plain_problem_error():
    with pytest.raises(ProblemError) as info:
        adjoint.loads(X + "model: {type: Tanhh}\n", name="f.yaml")
    assert not isinstance(info.value, ProblemErrors)


def test_at_most_twenty_lines_then_a_count():
    text = "name: t\ninputs:\n" + "".join(f"  x{i}: [NaN]\n" for i in range(25)) + "model: {type: ReLU}\n"
    out = lines(text)
    assert len(out) == MAX_REPORTED + 1 == 21
    assert out[0].startswith("f.yaml:3:8: input 'x0': 'NaN' is not a finite number")
    assert out[-1] == "f.yaml:23:9: 5 more errors not shown (at most 20 are listed); fix these first"


def test_the_cli_prints_every_line_and_exits_2(tmp_path):
    path = tmp_path / "three.yaml"
    path.write_text(THREE)
    result = CliRunner().invoke(main, ["solve", str(path)])
    assert result.exit_code == 2 and result.stdout == ""
    assert [line.split(": ", 1)[0] for line in result.stderr.splitlines()] == \
        [f"{path}:3:39", f"{path}:6:46", f"{path}:8:12"]


# ----------------------------------------------------------------------------- until the new runtime

def solve_error(forward: str) -> str:
    with pytest.raises(ProblemError) as info:
        adjoint.loads(X + f"model: {{forward: '{forward}'}}\nloss: 'sum(y)'\n", name="f.yaml").solve()
    return info.value.line()


def test_a_name_pytorch_has_is_not_a_typo_of_another():
    assert solve_error("copysign(x, x)") == ("f.yaml:4:19: 'copysign' is a PyTorch function adjoint does not model yet "
                                              "(in the forward of 'model'); see docs/not-modelled.md")
    assert solve_error("tanhh(x)") == "f.yaml:4:19: unknown function 'tanhh' in the forward of 'model'; did you mean 'tanh'?"


def test_prefixed_calls():
    assert adjoint.loads(X + "model: {forward: 'torch.relu(x) + F.tanh(x)'}\nloss: 'torch.sum(y)'\n").solve()
    assert solve_error("F.exp(x)") == ("f.yaml:4:19: PyTorch has no F.exp (torch.nn.functional has no 'exp'); write "
                                       "exp(...) without the prefix, or a function the prefix has")


@pytest.mark.parametrize("written", ["123", "on", "null", "0x1f", "yes", "007", "2026-11-30"])
def test_a_name_yaml_reads_as_a_number_or_boolean_is_its_text(written):
    """``name: 123`` / ``on`` / ``null`` are a number, a boolean, an empty value to YAML, but the text
    matches the contract's [a-z0-9_-]+: the problem is named by the text written, as variant keys are."""
    assert ok(f"name: {written}\ninputs:\n  x: [1]\nmodel: {{type: ReLU}}\nvariants:\n  {written}: {{}}\n").name \
        == written
    assert [v.name for v in ok(f"name: t\ninputs:\n  x: [1]\nmodel: {{type: ReLU}}\nvariants:\n  {written}: {{}}\n")
            .variants] == [written]


def test_a_name_that_is_no_text_is_refused():
    assert one("name: 1.5\ninputs:\n  x: [1]\nmodel: {type: ReLU}\n") == \
        "f.yaml:1:7: name '1.5' must match [a-z0-9_-]+ (lower case, digits, _ and -)"
    assert one("name:\ninputs:\n  x: [1]\nmodel: {type: ReLU}\n") == \
        "f.yaml:1:6: name '' must match [a-z0-9_-]+ (lower case, digits, _ and -)"


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_files_own_float_dtype_on_an_input_is_a_no_op(dtype):
    text = (f"name: t\ndtype: {dtype}\ninputs:\n  x: {{value: [1], dtype: {dtype}, requires_grad: true}}\n"
            f"targets:\n  t: {{value: [2], dtype: {dtype}}}\nmodel: {{type: ReLU}}\n"
            f"variants:\n  v: {{inputs: {{x: {{value: [3], dtype: {dtype}}}}}}}\n")
    p = ok(text)
    assert [d.dtype for v in p.variants for d in v.inputs] + [d.dtype for d in p.targets] == [None, None]
    other = "float64" if dtype == "float32" else "float32"
    assert one(text.replace(f"dtype: {dtype}, requires_grad", f"dtype: {other}, requires_grad")) == \
        (f"f.yaml:4:26: input 'x' is {other} in a {dtype} file, which is not modelled (one float dtype per file); "
         f"drop dtype: or make the file's dtype: {other}")


def test_a_timestamp_is_a_name_only_at_the_top_level_name():
    """``name: 2026-11-30`` (a YAML 1.1 timestamp) names the problem; a timestamp elsewhere, and an
    explicit !!timestamp tag on the name, are still refused."""
    assert ok("name: &n 2026-11-30\ninputs:\n  x: [1]\nmodel: {type: ReLU}\n").name == "2026-11-30"
    assert one("name: !!timestamp 2026-11-30\ninputs:\n  x: [1]\nmodel: {type: ReLU}\n") == \
        "f.yaml:1:7: YAML tag !!timestamp is not allowed; problem files are plain data (numbers, strings, lists, " \
        "mappings)"
    assert one("name: t\ndescription: 2026-11-30\ninputs:\n  x: [1]\nmodel: {type: ReLU}\n") == \
        "f.yaml:2:14: YAML tag !!timestamp is not allowed; problem files are plain data (numbers, strings, lists, " \
        "mappings)"
