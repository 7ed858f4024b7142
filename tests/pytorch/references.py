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
