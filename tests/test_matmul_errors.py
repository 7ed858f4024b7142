"""Matrix products of mismatched sizes are PyTorch's RuntimeError, an answer (no longer a refusal).

The autograd kernel makes the node and packs what it saves before the kernel refuses, so
saved-tensor hooks are called first. The torch side of ``verify`` cannot name the node of a
pack whose op then failed (the node is freed with the failed call), so the pack calls are
pinned here against hand-written torch: the same packs, in order, with the same tensors, then
the same error. The regression files tests/data/regressions/*mismatch*raise*.yaml check the
errors and the module hooks around them through ``verify``'s own comparison.
"""

import pytest

import adjoint

CASES = {   # name: (p, q, the torch expression on the leaves a, b)
    "mm": ([[1, 2]], [[1, 2, 3]], lambda a, b: a @ b),
    "vector_matrix": ([1, 2, 3], [[1, 2], [3, 4]], lambda a, b: a @ b),
    "dot": ([1, 2, 3], [0.5, -1], lambda a, b: a @ b),
    "mv": ([[1, 2, 3], [4, 5, 6]], [0.5, -1], lambda a, b: a @ b),
    "folded": ([[[1, 2, 3]], [[4, 5, 6]]], [[1, 2, 3, 4], [5, 6, 7, 8]], lambda a, b: a @ b),
    "bmm": ([[[1], [2]]], [[[1], [2]]], lambda a, b: a @ b),
    "linear": ([[1, 2]], [[1, 2, 3]], lambda a, b: __import__("torch").nn.functional.linear(a, b)),
}

TEMPLATE = """
name: {name}
dtype: float64
inputs:
  p: {{value: {p}, requires_grad: true}}
  q: {{value: {q}, requires_grad: true}}
model:
  inputs: [p, q]
  forward: "{forward}"
loss: "sum(y)"
hooks:
  - {{saved_tensors: {{pack: "x", unpack: "x"}}}}
"""


@pytest.mark.torch
def test_packs_then_the_kernel_refuses_as_torch_does():
    import torch

    for name, (p, q, fn) in CASES.items():
        forward = "linear(p, q)" if name == "linear" else "p @ q"
        problem = adjoint.loads(TEMPLATE.format(name=name, p=p, q=q, forward=forward), name=name)
        v = problem.solve().variants[0]
        predicted = ([(c.kind, c.node, list(c.args["x"].shape)) for c in v.hook_calls],
                     v.error.type, v.error.message, v.error.during)

        a = torch.tensor(p, dtype=torch.float64, requires_grad=True)
        b = torch.tensor(q, dtype=torch.float64, requires_grad=True)
        packs = []

        def pack(x):
            packs.append(list(x.shape))
            return x

        with pytest.raises(RuntimeError) as caught:
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda x: x):
                fn(a, b)
        node = {"mm": "MmBackward0", "vector_matrix": "MmBackward0", "dot": "DotBackward0", "mv": "MvBackward0",
                "folded": "MmBackward0", "bmm": "BmmBackward0", "linear": "MmBackward0"}[name]
        observed = ([("pack", node, s) for s in packs], "RuntimeError", str(caught.value), "forward")
        assert predicted == observed, name
