"""A convolution with a padding string whose weight has another rank than the call's, against torch.

``at::_convolution_mode``: ``padding='same'`` refuses before any node (after an unbatched
input's unsqueeze): "weight should have at least three dimensions", "non-positive groups is
not supported", "Expected 3-dimensional input for 3-dimensional weight[2, 2, 2], but got
4-dimensional input of size [2, 2, 2, 2] instead", then "stride cannot broadcast to 2
dimensions" (the weight's own rank too); ``padding='valid'`` is padding 0, whose
argument errors the kernel raises once the node has packed input and weight ("expected stride
to be a single integer value or a list of 1 values ..."). A grid of ranks, the weight's
rank, both strings and a few arguments (the weight of the call's own rank included), each
compared with real torch: the pack calls (their shapes, in order) and the error, or none.
"""

import itertools
import os
import warnings

import pytest

import adjoint
from conftest import counting

TEMPLATE = """
name: case
dtype: float64
inputs:
  a: {{value: {x}, requires_grad: true}}
  w: {{value: {w}, requires_grad: true}}
model:
  inputs: [a, w]
  forward: "{forward}"
loss: "sum(y)"
hooks:
  - {{saved_tensors: {{pack: "x", unpack: "x"}}}}
"""

EXTRAS = {"": {}, ", stride=2": {"stride": 2}, ", groups=0": {"groups": 0}, ", dilation=2": {"dilation": 2},
          ", stride=(1, 1, 1), dilation=(2, 2, 2)": {"stride": (1, 1, 1), "dilation": (2, 2, 2)},
          ", dilation=(1, 1)": {"dilation": (1, 1)}}


@pytest.mark.torch
def test_padding_string_with_a_weight_of_another_rank_as_torch():
    import torch
    import torch.nn.functional as F

    checked, errors = 0, set()
    for rank, unbatched, wr, pad, extra in itertools.product((1, 2, 3), (True, False), (2, 3, 4, 5, 6),
                                                             ("'same'", "'valid'", "0"), EXTRAS):
        xs = (2,) * (rank + 1 if unbatched else rank + 2)
        ws = (2,) * wr
        forward = f"F.conv{rank}d(a, w, padding={pad}{extra})"
        v = adjoint.loads(TEMPLATE.format(x=counting(xs), w=counting(ws), forward=forward), name="case").solve().variants[0]
        predicted = ([list(c.args["x"].shape) for c in v.hook_calls if c.kind == "pack"],
                     None if v.error is None else (v.error.type, v.error.message, v.error.during))

        a = torch.tensor(counting(xs), dtype=torch.float64, requires_grad=True)
        w = torch.tensor(counting(ws), dtype=torch.float64, requires_grad=True)
        packs, error = [], None

        def pack(t):
            packs.append(list(t.shape))
            return t
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), warnings.catch_warnings():
            warnings.simplefilter("ignore")   # padding='same' with an even kernel warns (adjoint's own test)
            try:
                getattr(F, f"conv{rank}d")(a, w, padding=pad.strip("'") if "'" in pad else int(pad), **EXTRAS[extra])
            except RuntimeError as exc:
                error = ("RuntimeError", str(exc), "forward")
        assert predicted == (packs, error), (forward, xs, ws)
        checked += 1
        if error is not None:
            errors.add(error[1].split(" but")[0].split(",")[0])
    assert checked == 540 and len(errors) >= 6, (checked, errors)


def test_the_even_kernel_warning_is_issued_once_per_process():
    """at::_convolution_mode warns with TORCH_WARN_ONCE: a fresh process running two convolutions
    (a training loop's second forward) issues it once, and so does the answer (it warned at every
    call, and verify's torch side, which removes repeats by the engine's own list, agreed)."""
    script = ("import warnings, torch\n"
              "warnings.simplefilter('always')\n"
              "conv = torch.nn.Conv2d(1, 1, 2, padding='same')\n"
              "x = torch.ones(1, 1, 2, 2)\n"
              "with warnings.catch_warnings(record=True) as w:\n"
              "    warnings.simplefilter('always')\n"
              "    conv(x); conv(conv(x))\n"
              "print(len(w))\n")
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "1"
    path = os.path.join(os.path.dirname(__file__), "data", "regressions", "conv_same_even_kernel_warns_once.yaml")
    got = adjoint.load(path).solve().to_json()["variants"]["default"]["warnings"]
    assert len(got) == 1 and got[0]["message"].startswith("Using padding='same' with even kernel")
