"""The pieces of ``benchmarks/run.py``, the performance harness for issue 15.

``problems`` writes every workload's problem file from code (no big files in the repository);
``reference`` holds what adjoint is measured against (torch, a python-flint floor, SymPy);
``clock`` times things (interleaved rounds, whole processes, the engine's phases);
``workloads`` measures each workload; ``report`` prints the table and the JSON.
"""
