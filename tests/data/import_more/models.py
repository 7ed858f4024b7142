"""User modules adjoint import refused or crashed on although the format holds them (each found
by a user trial; tests/test_import_selfcheck.py)."""
import torch
from torch import nn


class Base(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(2, 2)


class Shape(Base):                 # n, c = x.shape: a torch.Size kept, then indexed
    def forward(self, x):
        n, c = x.shape
        return self.fc(x.reshape(c, n)) * 2


class RootDefault(Base):           # a root argument with a default, not given
    def forward(self, x, temperature=2.0):
        return self.fc(x) / temperature


class DictOutput(Base):            # a dict of tensors as the output
    def forward(self, x):
        h = self.fc(x)
        return {"logits": h, "aux": h.tanh()}


def make_shape(): return Shape()
def make_root_default(): return RootDefault()
def make_dict_output(): return DictOutput()


class Invert(nn.Module):           # ~m of a bool input (import refused operator.invert)
    def forward(self, x, m):
        return x.masked_fill(~m, 0.0)


class PositionSlice(nn.Module):    # self.pos[:, :T] with T = x.size(1) (refused as "a slice of tensors")
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.pos = nn.Parameter(torch.randn(1, 4, 2) * 0.1)

    def forward(self, x):
        T = x.size(1)
        return x + self.pos[:, :T]


def make_invert(): return Invert()
def make_position_slice(): return PositionSlice()


def make_gru_without_bias():       # bias=False: RNN modules keep the flag itself (read as True before)
    torch.manual_seed(0)
    return nn.GRU(2, 2, bias=False, batch_first=True)


class Positions(nn.Module):        # torch.arange(T, device=x.device): x.device was refused
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.pos = nn.Embedding(8, 4)
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        B, T, C = x.shape
        p = torch.arange(T, device=x.device)
        return self.lin(x) + self.pos(p)


class RecordedInvert(nn.Module):   # recorded (a data-dependent if): ~ arrives as Tensor.__invert__
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        T = x.size(1)
        if x.sum() > -100:
            x = x * 2
        mask = ~torch.tril(torch.ones(T, T)).bool()
        return self.lin(x).masked_fill(mask, 0.0)


def make_positions(): return Positions()
def make_recorded_invert(): return RecordedInvert()


class OptionalMask(nn.Module):     # forward(x, mask=None), called without it: fx traced the mask branch
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = nn.Linear(3, 2)

    def forward(self, x, mask=None):
        h = self.lin(x)
        if mask is not None:
            h = h.masked_fill(mask, 0.0)
        return h, None             # (logits, loss) without targets: a None in the output


def make_optional_mask(): return OptionalMask()


class BatchNormTraining(nn.Module):   # batch statistics: the exact loss is 0, float32's is not
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 2)
        self.bn = nn.BatchNorm1d(2)

    def forward(self, x):
        return self.bn(self.fc(x))


def make_bn_training():
    torch.manual_seed(0)
    return BatchNormTraining()


class ChildNamedModel(nn.Module):    # a wrapper: self.model = backbone
    def __init__(self):
        super().__init__()
        self.model = nn.Linear(3, 2)

    def forward(self, x):
        return self.model(x)


class ArgumentNamedY(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)

    def forward(self, x, y):
        return ((self.fc(x) - y) ** 2).mean()


def make_child_named_model(): return ChildNamedModel()
def make_argument_named_y(): return ArgumentNamedY()


class MaxValues(nn.Module):          # h.max(dim=1).values: import refused the attribute
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)

    def forward(self, x):
        h = self.fc(x)
        return h.max(dim=1).values + torch.min(h, dim=0).indices.sum() + torch.max(h, dim=0)[0].sum()


def make_max_values():
    torch.manual_seed(0)
    return MaxValues()
