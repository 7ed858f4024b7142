"""The node a forward op builds, named from the op alone (adjoint/torchside/opnodes.py): a pack
hook's node when the op raised after its pack hooks ran and took the node with it
(tests/data/regressions/pack_hook_then_op_raises.yaml checks the whole run through verify).
Compared with the nodes real PyTorch builds for the same ops, found by the profiler records
the torch side reads."""

import pytest


@pytest.mark.torch
def test_forward_op_records_name_the_nodes_torch_builds():
    import torch
    import torch.nn.functional as F
    from torch.autograd import profiler_legacy

    from adjoint.torchside.opnodes import node_of_op

    x = torch.tensor([[0.25, 0.5], [0.75, 0.125]], dtype=torch.float64, requires_grad=True)
    made = []
    with profiler_legacy.profile(record_shapes=True) as prof:
        p = torch.sigmoid(x)
        made += [p, F.binary_cross_entropy(p, torch.ones_like(p)), F.nll_loss(p, torch.tensor([0, 1])),
                 F.mse_loss(p, x.detach()), x.exp(), x * 2, x * x, x.sum(), x.sum(0), torch.tanh(x).mean()]
    nodes = {}
    for t in made:
        stack = [t.grad_fn]
        while stack:
            n = stack.pop()
            if n is not None and n._sequence_nr() < 2 ** 63:
                nodes[n._sequence_nr()] = n.name()
                stack.extend(m for m, _ in n.next_functions)
    named = {}
    for e in prof.function_events:
        if e.sequence_nr in nodes and e.name.startswith("aten::"):
            got = node_of_op(e.name, e.input_shapes)
            if got is not None:               # None: the overloads stay undecided, never a guess
                assert got == nodes[e.sequence_nr], (e.name, got, nodes[e.sequence_nr])
                named[e.name] = got
    assert named["aten::binary_cross_entropy"] == "BinaryCrossEntropyBackward0"
    assert named["aten::nll_loss_forward"] == "NllLossBackward0"   # F.nll_loss: the op nll_loss_forward
    assert named["aten::exp"] == "ExpBackward0" and named["aten::sigmoid"] == "SigmoidBackward0"
    # mul.Tensor and mul.Scalar take two arguments each: an argument with dims is a tensor (x * x);
    # a number and a 0-d tensor both record [] (x * 2): undecided
    assert named["aten::mul"] == "MulBackward0"
    assert node_of_op("aten::mul", [[2, 2], []]) is None and node_of_op("aten::mul_", [[2, 2], [1]]) == "MulBackward0"
    assert node_of_op("MyFunction", [[1]]) is None and node_of_op("aten::not_an_op", [[1]]) is None
