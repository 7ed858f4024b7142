"""What a ``wrap: fully_shard`` file's document adds after rank 0's derivation: "What
fully_shard does" -- the parameter groups, which rows each rank holds, and how the ranks'
gradients become each rank's ``.grad``. Typesets :class:`adjoint.derivation.fsdp.FSDPInfo`."""

from __future__ import annotations

from adjoint.render.latex.text import code, esc


def fsdp_section(info) -> str:
    W = info.world_size
    out = ["\\subsection{What fully\\_shard does}\n",
           f"The file runs on $W = {W}$ ranks, one process each, every rank the same script on its own inputs; the "
           "derivation above is rank 0's, computed with the whole (all-gathered) parameters, as the forward and "
           "backward use them. Each \\texttt{fully\\_shard} call makes one parameter group; a parameter the file "
           "names is the group's sharded \\texttt{DTensor} parameter (\\texttt{Shard(0)}): rank $r$ holds rows "
           "$[r c, \\min(n, (r+1) c))$ of its $n$ rows, $c = \\lceil n / W \\rceil$. When the gradient of the "
           "group's module inputs is computed (its \\texttt{RegisterPostBackwardFunctionBackward} node runs, "
           "after the module's full backward hook), or at the end of the backward when those inputs do not "
           "require grad, the group's gradients are reduce-scattered: each rank's \\texttt{.grad} gets its rows "
           "of the mean $\\frac{1}{W}\\sum_r g_r$ (added to the \\texttt{.grad} it had), and then the parameter's "
           "post-accumulate-grad hooks are called. A tensor hook on a parameter would sit on the sharded "
           "parameter, which the forward does not use.\n\n"]
    if info.reshard_after_forward is not None:
        out.append(f"\\texttt{{reshard\\_after\\_forward={info.reshard_after_forward}}} changes when the parameters "
                   "are all-gathered again, not what any hook is handed.\n\n")
    out.append("\\begin{itemize}\n")
    for label, params in info.groups:
        rows = "; ".join(f"{code(name)}: " + ", ".join(_rows(r, lo, hi) for r, (lo, hi) in enumerate(parts))
                         for name, parts in params)
        out.append(f"\\item group of {code(label)}: {rows or esc('no parameter of its own')}\n")
    out.append("\\end{itemize}\n")
    return "".join(out)


def _rows(r: int, lo: int, hi: int) -> str:
    if hi <= lo:
        return f"rank {r} none"
    return f"rank {r} row {lo}" if hi == lo + 1 else f"rank {r} rows {lo}--{hi - 1}"
