"""User modules whose forward does something an import used to leave out of the file it wrote
(each found by a user trial; tests/test_import_selfcheck.py). Every factory is deterministic."""
import torch
import torch.nn.functional as F
from torch import nn


class Clip(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clamp(-0.1, 0.1)

    @staticmethod
    def backward(ctx, g):
        return g            # straight-through


class Base(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(3, 3)


class CustomFunction(Base):        # Function.apply runs its own backward
    def forward(self, x):
        return Clip.apply(self.fc(x)) * 2


class BufferCounter(Base):         # an in-place buffer update that does not depend on x
    def __init__(self):
        super().__init__()
        self.register_buffer("step", torch.zeros(()))

    def forward(self, x):
        self.step.add_(1)
        return self.fc(x) * self.step


def normalize(h):
    with torch.no_grad():
        s = h.norm()
    return h / s


class HelperNoGrad(Base):          # a grad-mode switch inside a helper function
    def forward(self, x):
        return normalize(self.fc(x))


class GradModeBranch(Base):        # a branch on requires_grad
    def forward(self, x):
        h = self.fc(x)
        if h.requires_grad:
            h = h * 2
        return h


class PyCounter(Base):             # Python state the forward changes
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return self.fc(x) * self.calls


class Inner(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)

    def forward(self, x, bias=None):
        h = self.fc(x)
        if bias is not None:
            h = h + bias
        return h


class OptionalArgument(nn.Module):   # a child's optional argument left at None
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.inner = Inner()

    def forward(self, x):
        return self.inner(x)


class Plain(Base):
    def forward(self, x):
        return torch.tanh(self.fc(x)) * 2


def make_custom_function(): return CustomFunction()
def make_buffer_counter(): return BufferCounter()
def make_helper_no_grad(): return HelperNoGrad()
def make_grad_mode_branch(): return GradModeBranch()
def make_py_counter(): return PyCounter()
def make_optional_argument(): return OptionalArgument()
def make_plain(): return Plain()


def make_monkey_patched():         # a forward replaced on one instance
    m = Plain()
    fc = m.fc
    fc.forward = lambda x: F.linear(x, fc.weight, fc.bias) * 2
    return m


class FunctionalDropout(Base):     # F.dropout in training mode: random, which the file cannot hold
    def forward(self, x):
        return self.fc(F.dropout(x, 0.5, training=self.training))


def make_functional_dropout(): return FunctionalDropout()
