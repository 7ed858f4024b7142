"""``adjoint latex`` on v2 problems: every problem file renders (no internal error, ever), a
representative subset compiles with pdflatex (strict: no LaTeX error, no equation in the margin;
benchmarks/latex_all.py compiles all of them), and the text says what each v2 feature needs said
-- checked on the typeset text (the mathematics is checked on the record: test_derivation.py)."""

from __future__ import annotations

import glob
import os
import re
import subprocess
import sys

import pytest

import adjoint
from adjoint.format.errors import ProblemError
from adjoint.render.latex import render_document
from adjoint.render.pdf import compile_pdf, find_engine
from conftest import single_process

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FILES = single_process(sorted(glob.glob(os.path.join(ROOT, "problems", "*.yaml"))
                              + glob.glob(os.path.join(ROOT, "tests", "data", "**", "*.yaml"), recursive=True)
                              + glob.glob(os.path.join(ROOT, "tests", "pytorch", "*.yaml"))))

#: one file per v2 feature: compiled in the suite
COMPILED = ["tests/data/latex/views_and_copies.yaml", "tests/data/latex/mlp_cross_entropy.yaml",
            "tests/pytorch/test_hooks.yaml", "tests/pytorch/test_saved_tensor_hooks_custom_error_propagation.yaml",
            "tests/pytorch/test_module_global_hooks.yaml", "tests/pytorch/test_multi_grad_any_hooks.yaml",
            "tests/pytorch/test_retain_grad_inplace_over_view.yaml", "tests/pytorch/test_kwarg_hooks.yaml",
            "tests/pytorch/test_post_accumulate_grad_hook_ordering.yaml",
            "tests/pytorch/test_saved_variable_packing_unpacking_saved_original_with_default_hooks.yaml",
            "tests/pytorch/test_retains_grad_inplace_multiple_outputs.yaml",
            "tests/pytorch/test_always_called_forward_hooks.yaml", "tests/data/verify_v2/modules.yaml",
            "tests/data/verify_v2/names.yaml"]

_CACHE: dict = {}


def _tex(path: str) -> str:
    if path not in _CACHE:
        _CACHE[path] = render_document(adjoint.load(os.path.join(ROOT, path)).solve())
    return _CACHE[path]


@pytest.mark.parametrize("path", FILES, ids=lambda p: os.path.relpath(p, ROOT))
def test_every_problem_renders(path):
    try:
        pred = adjoint.load(path).solve()
    except ProblemError:
        pytest.skip("bad input: exit 2, before any LaTeX")
    tex = render_document(pred)
    assert tex.startswith("\\documentclass") and tex.rstrip().endswith("\\end{document}")
    assert tex.isascii()
    assert not re.search(r"v_\{-?\d+\}", tex), "a tensor without a symbol leaked into the mathematics"


@pytest.mark.skipif(find_engine() is None, reason="no pdflatex")
@pytest.mark.parametrize("path", COMPILED)
def test_v2_documents_compile(path):
    compile_pdf(_tex(path), None, strict=True)


def test_latex_cli_on_a_v2_file(tmp_path):
    out = tmp_path / "steps.tex"
    proc = subprocess.run([sys.executable, "-m", "adjoint", "latex", os.path.join(ROOT, "tests/pytorch/test_hooks.yaml"),
                           "-o", str(out)], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": ROOT})
    assert proc.returncode == 0, proc.stderr
    assert "\\subsection{Steps}" in out.read_text()


# ----------------------------------------------------------------------------- what the text says

def test_steps_passes_and_accumulation_are_typeset():
    tex = _tex("tests/pytorch/test_hooks.yaml")
    assert "\\subsection{Steps}" in tex and "backward pass 2 (\\texttt{backward()}" in tex
    assert "\\texttt{retain\\_graph=True}" in tex and "hooks removed" in tex
    assert "\\subsection{Backward pass 2: gradients}" in tex
    assert "already held a gradient from an earlier backward pass" in tex
    assert "\\text{added}" in tex
    assert "Exactly as in forward pass 1 of variant" in tex        # a repeated forward is referred to


def test_errors_are_typeset():
    tex = _tex("tests/pytorch/test_saved_tensor_hooks_custom_error_propagation.yaml")
    assert "\\subsection{The error}" in tex and "\\texttt{CustomError}" in tex
    assert "Why: the hook's own code raises it" in tex and "never runs (PyTorch raised before)" in tex
    assert "The hook call that raises is number 1" in tex


def test_in_place_and_views_are_typeset():
    tex = _tex("tests/pytorch/test_retain_grad_inplace_over_view.yaml")
    assert "(\\texttt{CopySlices})" in tex and "regenerates its \\texttt{grad\\_fn}" in tex
    assert "\\leftarrow 2\\,x_{1}[{:}]" in tex                      # base with [:] replaced by 2 x_1[:]
    tex = _tex("tests/data/latex/views_and_copies.yaml")
    for piece in ("\\operatorname{cat}_{0}", "\\operatorname{stack}_{1}", "\\operatorname{expand}_{2\\times 3}",
                  "\\operatorname{permute}_{(2,0,1)}", "\\operatorname{reshape}_{3\\times 2}", "x[{:},1{:}]",
                  "\\operatorname{place}", "a copy detached from the graph"):
        assert piece in tex, piece
    assert "the in-place ops after that made" in tex                  # the hook left on k's old version


def test_hook_kinds_are_typeset():
    tex = _tex("tests/pytorch/test_module_global_hooks.yaml")
    assert "registered globally" in tex and "every module (a global hook)" in tex
    tex = _tex("tests/pytorch/test_multi_grad_any_hooks.yaml")
    assert "multi-grad hook" in tex and "\\texttt{any}" in tex
    tex = _tex("tests/pytorch/test_post_accumulate_grad_hook_ordering.yaml")
    assert "post-accumulate-grad hook" in tex and "Here the node is the leaf's \\texttt{AccumulateGrad}" in tex
    tex = _tex("tests/pytorch/test_saved_variable_packing_unpacking_saved_original_with_default_hooks.yaml")
    assert "The pack hook" in tex and "The unpack hook" in tex and "\\texttt{other} ($a$) that the node saves" in tex
    tex = _tex("tests/pytorch/test_kwarg_hooks.yaml")
    assert "\\texttt{with\\_kwargs=True}" in tex and "\\mathtt{kwargs}[\\text{\\texttt{'bias'}}]" in tex
    tex = _tex("tests/pytorch/test_always_called_forward_hooks.yaml")
    assert "\\texttt{always\\_call=True}" in tex


def test_grads_at_every_hook_call():
    """Issue 10: at every hook call, the .grad of each leaf at that moment (None until AccumulateGrad ran)."""
    tex = _tex("problems/hook_order.yaml")
    calls = tex.count("\\subsubsection*{") - tex.count("\\subsubsection*{\\texttt{")
    assert tex.count("At this moment: ") == calls
    assert "At this moment: $\\mathtt{x.grad} = \\mathrm{None}$" in tex


def test_layers_and_losses_read_as_functions():
    tex = _tex("tests/data/latex/mlp_cross_entropy.yaml")
    assert "\\operatorname{gelu}_{\\tanh}\\left(x_{1}\\right)" in tex
    assert ("\\operatorname{nll}_{\\mathrm{mean}}\\left(\\log\\operatorname{softmax}_{\\mathrm{dim}=1}"
            "\\left(x_{3}\\right),\\ t\\right)") in tex
    assert "\\operatorname{gelu}'_{\\tanh}" in tex and "J_{\\operatorname{log\\_softmax}" in tex
    assert "(\\texttt{int64})" in tex                                  # the class indices keep their dtype


def test_nn_layers_read_as_functions():
    """Convolution, batch norm and pooling are one function each (with their arguments as a subscript), their
    J^T lambda declared; embedding's indices keep their dtype (a one-element write into a gradient, s[0, 1],
    once put a 0-d array inside the value: the backend's assign now stores the number)."""
    tex = _tex("tests/data/verify_v2/modules.yaml")
    assert "\\operatorname{conv}" in tex and "\\operatorname{BN}_{\\mathrm{train}" in tex
    assert "J_{\\operatorname{conv}" in tex
    names = _tex("tests/data/verify_v2/names.yaml")
    assert "\\operatorname{embedding}" in names
