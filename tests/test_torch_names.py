"""adjoint/format/data/torch_names.json is what real torch has (regenerated in memory and compared),
and the accessor answers from it without importing torch."""

import importlib.util
import json
import os
import subprocess
import sys

from adjoint.format import torch_names

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_file_is_what_torch_has():
    spec = importlib.util.spec_from_file_location("gen", os.path.join(ROOT, "scripts", "gen_torch_names.py"))
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    import torch
    with open(os.path.join(ROOT, "adjoint", "format", "data", "torch_names.json"), encoding="utf-8") as fh:
        stored = json.load(fh)
    assert stored["torch_version"] == torch.__version__
    assert stored["torch"] == gen.functions(torch)
    assert stored["functional"] == gen.functions(torch.nn.functional)
    assert stored["tensor"] == gen.public(dir(torch.Tensor))
    assert stored["nn_modules"] == gen.module_classes()


def test_names_are_told_apart_by_namespace():
    assert torch_names.is_function("unfold") and torch_names.is_function("cross_entropy")
    assert torch_names.is_function("detach") and not torch_names.is_function("detatch")
    assert torch_names.is_tensor_member("mT") and torch_names.is_tensor_member("relu_")
    assert torch_names.is_nn_module("LSTM") and not torch_names.is_nn_module("relu")


def test_the_accessor_does_not_import_torch():
    code = "import sys, adjoint.format.torch_names as t; t.is_function('relu'); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env=dict(os.environ, PYTHONPATH=ROOT))
    assert out.stdout.strip() == "False", out.stderr
