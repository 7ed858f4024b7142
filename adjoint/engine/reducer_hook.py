"""The post-hook DistributedDataParallel's C++ Reducer puts on every parameter's AccumulateGrad.

``Reducer::Reducer`` adds one ``LambdaPostHook`` per parameter to its grad accumulator (it
holds the accumulator, so the node lives as long as the wrapper). The engine runs it as a
post-hook of the AccumulateGrad node: after the tensor hooks (pre-hooks), the accumulation
into ``.grad`` and the post-accumulate-grad hooks, and before node post-hooks the user
registers after wrapping. The model of what it does is :mod:`adjoint.engine.distributed`.
"""

from __future__ import annotations


class ReducerPostHook:
    """``autograd_hook(index)`` of one rank's Reducer, on parameter ``index``'s AccumulateGrad."""

    __slots__ = ("reducer", "index")

    def __init__(self, reducer, index: int):
        self.reducer = reducer
        self.index = index

    def __call__(self) -> None:
        self.reducer.autograd_hook(self.index)


class SinkHook(ReducerPostHook):
    """What ``_DDPSink.backward`` does besides handing its gradients on (with static_graph, the
    first time, ``queue_callback(reducer._delay_all_reduce)``), run as a post-hook of its node."""

    __slots__ = ()

    def __call__(self) -> None:
        self.reducer.sink_backward()
