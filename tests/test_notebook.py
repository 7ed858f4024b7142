"""The notebook display: docs/tour.ipynb executed in a real Jupyter kernel (nbclient), its
HTML, text and SVG outputs checked; and the HTML of each answer object on its own.

Expected numbers are SLinear's, derived by hand in tests/test_report.py.
"""

from __future__ import annotations

import html
import os

import pytest

import adjoint

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOK = os.path.join(ROOT, "docs", "tour.ipynb")
SLINEAR = os.path.join(ROOT, "problems", "slinear.yaml")

X_GRAD = "-0.1223882"       # -11951973/97656250
DL_DF0 = "-0.4079607"       # what the full hook is handed as grad_input
DL_DF1F = "-1.019902"       # what the legacy hook is handed as grad_input


def outputs(cell) -> dict:
    """mime type (or "stream") -> text of a code cell's outputs."""
    out: dict = {}
    for o in cell.outputs:
        if o.output_type == "stream":
            out["stream"] = out.get("stream", "") + o.text
        elif o.output_type == "error":
            raise AssertionError(f"the cell raised {o.ename}: {o.evalue}")
        else:
            out.update({k: v for k, v in o.data.items()})
    return out


@pytest.fixture(scope="module")
def executed():
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(NOTEBOOK, as_version=4)
    env_path = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = ROOT + (os.pathsep + env_path if env_path else "")  # the kernel imports this tree
    try:
        NotebookClient(nb, timeout=300, kernel_name="python3",
                       resources={"metadata": {"path": os.path.dirname(NOTEBOOK)}}).execute()
    finally:
        os.environ["PYTHONPATH"] = env_path
    return [c for c in nb.cells if c.cell_type == "code"]


@pytest.mark.notebook
@pytest.mark.graphviz
def test_the_notebook_runs_and_shows_tables(executed):
    pred = outputs(executed[0])
    page = pred["text/html"]
    assert "<b>slinear</b>" in page and "hook calls" in page and "what the hooks changed" in page
    assert f'title="[-7967982/9765625] (≈ [-0.8159214])"' in page      # the doubled grad_input, exact on hover
    assert html.unescape(page).count("loss = ") == 1                         # shared by the three variants
    assert pred["text/plain"] == "<Prediction 'slinear': 3 variants (full, rescaled, legacy)>"
    legacy = outputs(executed[1])["text/html"]
    assert "PowBackward0" in legacy and DL_DF1F in legacy
    assert outputs(executed[2])["stream"].strip() == \
        "\"no variant named 'nope'; this prediction has: full, rescaled, legacy\""
    call = outputs(executed[3])
    assert "<table" in call["text/html"] and "backward on module <b>f1</b>" in call["text/html"]
    assert call["text/plain"] == "<HookRecord backward on module 'f1' at PowBackward0: observed>"
    converted = outputs(executed[4])["text/plain"]
    assert converted.startswith("(-0.24477640704, [-0.24477640704], array([-0.24477641]), ")
    assert outputs(executed[5])["stream"] == "(4, 3)\na Tensor with 12 elements cannot be converted to Scalar\n"
    svg = outputs(executed[6])["image/svg+xml"]
    assert "<svg" in svg and "PowBackward0" in svg and "backward on f1" in svg


def test_html_of_each_answer_object():
    pred = adjoint.load(SLINEAR).solve()
    v = pred["rescaled"]
    page = v._repr_html_()
    assert "variant rescaled" in page and DL_DF0 in page and "×2" in page
    assert X_GRAD in page                               # before: the observing-only x.grad
    assert "<table" in v.hook_calls[0]._repr_html_()
    assert "J<sup>T</sup> grad_output" in v.boundaries[0]._repr_html_()
    assert "| 1 | full\\_backward on f1 | BackwardHookFunctionBackward |" in v._repr_markdown_()
    assert v.grads["f0.weight"]._repr_latex_() == "$\\begin{bmatrix} - \\frac{11951973}{48828125} \\end{bmatrix}$"


def test_html_escapes_the_problem_file(tmp_path):
    path = tmp_path / "h.yaml"
    path.write_text('name: h\ndescription: "<script>alert(1)</script>"\ninputs:\n  x: {value: [0.5], requires_grad: '
                    'true}\nmodel: {forward: "x * 2"}\nloss: "sum(y)"\nhooks:\n  - {tensor: x, label: "<img src=x>"}\n')
    page = adjoint.load(str(path)).solve()._repr_html_()
    assert "<script>" not in page and "<img" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "&lt;img src=x&gt;" in page


def test_html_of_errors_and_function_checks():
    pred = adjoint.load(os.path.join(ROOT, "problems", "v2", "inplace_hooks.yaml")).solve()
    page = pred["relu_after_hooked_module"].error._repr_html_()
    assert "PyTorch raises RuntimeError:</b> Output 0 of BackwardHookFunction is a view" in page
    assert "during the forward, before any hook call" in page
    checks = adjoint.load(os.path.join(ROOT, "problems", "custom_function.yaml")).solve().variants[0].functions
    assert any("differs from the true derivative" in c._repr_html_() for c in checks if not c.matches)
    assert all("equals the true derivative" in c._repr_html_() for c in checks if c.matches)


def test_a_distributed_answer_shows_every_rank():
    # problems/ddp.yaml: two ranks with different inputs, .grad averaged (the same on both);
    # the hook calls differ per rank. The HTML and the Markdown name each rank's answer.
    pred = adjoint.load(os.path.join(ROOT, "problems", "ddp.yaml")).solve()
    page = pred._repr_html_()
    assert "variant default, rank 0" in page and "variant default, rank 1" in page
    md = pred._repr_markdown_()
    assert "| default, rank 0 |" in md and "| default, rank 1 |" in md
    assert md.count("hidden.weight.grad") == 2
