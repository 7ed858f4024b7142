"""A tensor hook on a view whose base was written in place since (here under no_grad, through an
Identity module's output): PyTorch 2.13 segfaults registering it, and adjoint says so instead of
answering (docs/not-modelled.md). The crash is checked in a child process running a plain script;
reading ``is_leaf`` first (which regenerates the view's grad_fn) avoids it, and so does nothing else
a script would typically do with the tensor (``detach()``, ``requires_grad``, ``_version``)."""

import subprocess
import sys
import textwrap

import pytest

import adjoint
from adjoint.format.errors import ProblemError

FILE = "tests/errors/hook-on-module-output-view-written-under-no-grad.yaml"

SCRIPT = textwrap.dedent("""
    import sys, torch, torch.nn as nn
    A0 = nn.Parameter(torch.tensor([-0.75, 0.125, -0.75, 1, -1.5, -0.75], dtype=torch.float64))
    c1 = nn.Identity()
    def c0(register):
        h0 = c1(A0.view(3, 2))
        with torch.no_grad():
            h0.mul_(0.5)
        out = c1(h0)
        if register:
            if sys.argv[1] == "is_leaf":
                out.is_leaf
            elif sys.argv[1] == "detach":
                out.detach()
            out.register_hook(lambda g: g + 1)
        return out.norm()
    y = c0(False) + c0(True)
    print("ran")
""")


def _run(mode: str) -> int:
    return subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, timeout=120).returncode


@pytest.mark.torch
def test_a_plain_script_crashes_and_adjoint_says_so():
    assert _run("plain") == -11          # SIGSEGV
    assert _run("detach") == -11
    assert _run("is_leaf") == 0          # is_leaf regenerates the view's grad_fn first
    with pytest.raises(ProblemError, match=r"PyTorch 2\.13 crashes \(segmentation fault\) registering this hook"):
        adjoint.load(FILE).solve()


HARNESS = textwrap.dedent("""
    import adjoint
    from adjoint.torchside import run_variant
    p = adjoint.load(%r)
    run_variant(p, p.variants[0], p.dtype)
    print("ran")
""")


@pytest.mark.torch
def test_verify_torch_side_runs_the_file_as_a_plain_script_does():
    """verify's torch side reads no grad_fn the user's program did not: its forward hook that looks
    for BackwardHookFunction nodes skipped no argument, and reading the grad_fn of the written view
    (c1's 2nd call's input) made a new one there, so the hook later went on without a crash."""
    done = subprocess.run([sys.executable, "-c", HARNESS % FILE], capture_output=True, timeout=300)
    assert done.returncode == -11, done.stdout + done.stderr
