"""What a distributed file's document adds after rank 0's derivation: "What DistributedDataParallel
does" -- how the ranks' gradients are reduced (averaging, the comm hook, the options), and for
every backward pass the buckets in launch order (parameters in buffer order, each rank's buffer,
the result) and each rank's ``.grad`` before and after the reduction. Typesets
:class:`adjoint.derivation.ddp.DistributedInfo`."""

from __future__ import annotations

from adjoint.render.latex.layout import Block
from adjoint.render.latex.text import code, mcode
from adjoint.render.latex.writer import UnitWriter

_HOOK = {
    "none": "No comm hook is registered: the Reducer multiplies each gradient by $1/W$ as it copies it into its "
            "bucket (the buffers below hold those products), and all-reduces the bucket by summing over the ranks, so each rank ends with the mean "
            "$\\frac{1}{W}\\sum_r g^{(r)}$.",
    "allreduce": "The comm hook is the built-in \\texttt{allreduce\\_hook}: it divides the bucket by $W$ and "
                 "all-reduces it by summing over the ranks, so each rank ends with the mean "
                 "$\\frac{1}{W}\\sum_r g^{(r)}$.",
    "fp16_compress": "The comm hook is the built-in \\texttt{fp16\\_compress\\_hook}: the bucket is rounded to "
                     "float16, divided by $W$ there, summed over the ranks in float16 and copied back, so each "
                     "rank ends with a rounded mean.",
    "bf16_compress": "The comm hook is the built-in \\texttt{bf16\\_compress\\_hook}: the bucket is rounded to "
                     "bfloat16, divided by $W$ there, summed over the ranks in bfloat16 and copied back, so each "
                     "rank ends with a rounded mean.",
    "written": "The comm hook is the file's own: it is handed the bucket's flat buffer, \\texttt{all\\_reduce(T)} "
               "sums \\texttt{T} over the ranks, and what it returns becomes the bucket's gradients (a mean "
               "only when the hook divides by $W$; lines under \\texttt{does} first write the buffer in place).",
    "powerSGD": "The comm hook is the built-in \\texttt{powerSGD\\_hook}, in its first "
                "\\texttt{start\\_powerSGD\\_iter} iterations: plain all-reduce, the bucket divided by $W$ and "
                "summed over the ranks, so each rank ends with the mean $\\frac{1}{W}\\sum_r g^{(r)}$.",
}


class DistributedSection(UnitWriter):
    """The DDP section of one variant (rank 0's writer: values typeset as in the rest of the document)."""

    def ddp_section(self, info) -> str:
        W = info.world_size
        out = ["\\subsection{What DistributedDataParallel does}\n",
               f"The file runs on $W = {W}$ ranks, one process each, every rank the same script on its own "
               "inputs; the derivation above is rank 0's (every rank builds the same graph and fires its hooks in "
               "the same order, with its own values). DDP's Reducer puts a post-hook on every parameter's "
               "\\texttt{AccumulateGrad}: it runs after the tensor hooks, the accumulation into \\texttt{.grad} "
               "and the post-accumulate-grad hooks, so every hook above saw this rank's own, local gradient. "
               "The Reducer copies each ready gradient into a flat buffer, a \\emph{bucket}; when a bucket is "
               "complete (and every bucket before it was launched) it is reduced across the ranks, and when "
               "the backward pass ends each parameter's slice of its reduced bucket overwrites \\texttt{.grad}.\n\n",
               _HOOK[info.hook] + "\n\n", self._options(info)]
        for p in info.passes:
            out.append(self._pass(p, W, info.gradient_as_bucket_view))
        return "".join(out)

    @staticmethod
    def _options(info) -> str:
        words = []
        if info.find_unused_parameters and not info.static_graph:
            words.append("With \\texttt{find\\_unused\\_parameters=True} the model's output passes through DDP's "
                         "\\texttt{\\_DDPSink} (a \\texttt{\\_DDPSinkBackward} node in the graph); after each "
                         "synchronized forward the Reducer searches the graph from the output, and the parameters it "
                         "does not reach are marked ready when the first gradient arrives (their \\texttt{.grad}, or "
                         "zeros, go into the bucket). A parameter no rank used keeps its \\texttt{.grad} as it was. "
                         "The buckets keep their first order (the parameters' order, reversed by bucket) and are "
                         "never rebuilt.")
        if info.static_graph:
            words.append("With \\texttt{static\\_graph=True} the first iteration's output passes through "
                         "\\texttt{\\_DDPSink}, whose backward queues the Reducer's delayed all-reduce: the first "
                         "iteration launches every bucket only when its backward pass ends. The parameters that got "
                         "no gradient then stay the unused ones; the buckets are rebuilt before the third forward, "
                         "in the order gradients became ready in the second iteration.")
        elif not info.find_unused_parameters and info.bucket_cap_mb_list:
            words.append("With \\texttt{bucket\\_cap\\_mb\\_list} the first iteration's buckets are filled in "
                         "parameter order, the $i$-th holding at most the $i$-th listed limit (the last one for the "
                         "rest), and reversed; the next forward rebuilds them with the same limits in the order the "
                         "gradients became ready.")
        elif not info.find_unused_parameters:
            words.append("The first iteration has one bucket holding every parameter in parameter order; the next "
                         "forward rebuilds the buckets in the order the gradients became ready.")
        if info.skip_all_reduce_unused_params and info.find_unused_parameters and not info.static_graph:
            words.append("With \\texttt{skip\\_all\\_reduce\\_unused\\_params=True} a bucket holding only "
                         "unused parameters is not reduced at all.")
        if info.gradient_as_bucket_view:
            words.append("With \\texttt{gradient\\_as\\_bucket\\_view=True} each \\texttt{.grad} becomes a view of "
                         "its bucket as soon as its parameter is ready (without a comm hook, already divided by $W$).")
        return (" ".join(words) + "\n\n") if words else ""

    def _pass(self, p, W: int, view: bool = False) -> str:
        out = [f"\\subsubsection*{{Backward pass {p.number}}}\n"]
        if not p.synced:
            out.append("The forward it differentiates ran inside \\texttt{no\\_sync()}: the Reducer was not armed, "
                       "nothing is reduced, and \\texttt{.grad} keeps each rank's own accumulated gradient.\n\n")
        elif not p.reduced:
            out.append("Not every parameter became ready in this backward pass, so the Reducer never finishes its "
                       "reduction and \\texttt{.grad} keeps each rank's local value"
                       + (" (for a parameter that became ready, its bucket view: divided by $W$ when there is no "
                          "comm hook)" if view else "")
                       + "; the next forward raises PyTorch's ``Expected to have finished reduction'' error.\n\n")
        for b in p.buckets:
            out.append(f"Bucket {b.index} holds " + ", ".join(code(n) for n in b.parameters)
                       + " (in buffer order).\n")
            blk = Block()
            for r, buf in enumerate(b.buffers):
                self.value_rows(blk, f"\\text{{bucket}}^{{({r})}}", buf, [], exact=True)
            if b.results[0] is not None:
                self.value_rows(blk, "\\text{result}", b.results[0], [], exact=True)
            out.append(blk.render())
        if p.reduced:
            out.append("Each rank's \\texttt{.grad} after the pass (its slice of the result):\n")
        blk = Block()
        for name, values in p.final.items():
            for r, v in enumerate(values):
                lhs = mcode(name + ".grad") + f"^{{({r})}}"
                if v is None:
                    blk.eq(lhs, "\\mathrm{None}")
                else:
                    self.value_rows(blk, lhs, v, [], exact=True)
        out.append(blk.render())
        return "".join(out)

