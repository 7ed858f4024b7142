"""``adjoint verify``: run each problem in real PyTorch 2.13 and compare with the exact prediction.

For every file and variant: solve exactly (numerically, through the file's ``symbols:``, when
the file has free symbols), build and run the same thing in torch
(:mod:`adjoint.torchside`, imported lazily: the only place torch is loaded), and compare
(:mod:`adjoint.torchside.compare`, whose docstring states the tolerances). What PyTorch's run
shows is compared, v2 included: an ``error`` PyTorch raised (or did not), ``passes`` of a
variant with steps, the marks of each hook call; not the answer's ``adjoints`` (PyTorch
records no multiplier at a module boundary unless a full backward hook is on that module) nor
the ``exact`` strings (their ``value`` is). With ``fd``, the final gradients also
get a third, independent opinion: central differences in float64, as
``torch.autograd.gradcheck`` computes them, with gradcheck's tolerance (skipped, with the
reason, where the final gradients are not the derivative of one forward: steps, an error,
a hook that changes gradients or saved tensors).

Every file is loaded and solved before anything runs or prints, so bad input (a
ProblemError, which propagates; the CLI prints it as one line and exits 2) writes nothing.
Then torch is imported, whatever release is installed: when it cannot be, that is one line
saying what is wrong with the environment (:mod:`adjoint.torchside.torchenv`). The report names the torch
it ran against and, when that is not 2.13, says that the predictions follow 2.13's semantics. Exit code: 0 when everything matched, 1 on any mismatch.
"""

from __future__ import annotations


import time
from dataclasses import dataclass, field, replace

from adjoint.torchside.compare import FD_TOLERANCE, FLOOR_ULPS, Row, compare, compare_fd, tolerance
from adjoint.render.jsontext import dumps
from adjoint.format.problem import Problem
from adjoint.answer.solve import solve_problem
from adjoint.torchside.torchenv import MODELLED_TORCH, classify, semantics_note

PROGRESS_MIN_JOBS = 8   # a progress bar (when the caller gives one) from this many variants on


@dataclass
class VariantResult:
    """The verify result of one variant: its rows, timing and what torch showed."""

    problem: str
    file: str
    variant: str
    dtype: str
    rows: list[Row]
    seconds: float
    observed: dict = field(default_factory=dict, repr=False)

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.rows)

    def to_json(self) -> dict:
        rtol, atol = tolerance(self.dtype)
        return {"problem": self.problem, "file": self.file, "variant": self.variant, "dtype": self.dtype,
                "rtol": rtol, "atol": atol, "bounded": any(r.bound is not None for r in self.rows), "ok": self.ok, "seconds": round(self.seconds, 4),
                "mismatches": sum(not r.ok for r in self.rows), "rows": [r.to_json() for r in self.rows],
                "observed": self.observed}


def predict(problem: Problem, variant: str | None, mode: str = "exact"):
    """The prediction (exact by default, else in ``mode``); numeric through ``symbols:`` when
    the file has free symbols."""
    return solve_problem(problem, variant=variant, numeric=bool(problem.free_symbols()), mode=mode)


def predicted_json(vp, loc=None) -> dict:
    """The contract JSON of one predicted variant (the side ``compare`` holds PyTorch to); an
    exact answer with too many closed forms to print is refused first (``loc``: the file's)."""
    from adjoint.answer.text_budget import check_exact_text

    check_exact_text([vp], loc)
    return vp.to_json()


def run(files: list[str], dtype: str | None, as_json: bool, fd: bool, variant: str | None, echo,
        progress=None, *, load=None, mode: str = "exact", origin: bool = False) -> int:
    """Verify every variant of every file; ``echo`` prints a line, ``progress(total)`` (optional:
    the CLI passes a progress bar) returns an object with ``update(n, item)`` and ``finish()``.
    ``load(path)`` reads a problem (default :func:`adjoint.load`; the CLI's also reads ``-``);
    When torch is another release than the one predictions follow, the report says so in a line
    after the torch it names (JSON: ``"note"``). ``mode``:
    the answer mode predicted and compared (``structure``: shapes, None patterns, calls, no values).
    ``origin``: an imported file's ``origin:`` module is rebuilt and run (the user's Python, with
    the user's hooks: :mod:`adjoint.torchside.importer.originrun`); without it, it is not run."""
    if load is None:
        from adjoint.format.validate import load

    start = time.perf_counter()
    jobs = []
    for path in files:
        problem = load(path)
        if dtype is not None and dtype != problem.dtype:   # --dtype: predicted in it too (its messages name it)
            problem = replace(problem, dtype=dtype)
        prediction = predict(problem, variant, mode)
        for vp in prediction.variants:
            jobs.append((path, problem, vp))
    version = torch_version()
    if origin:      # every origin file is confined before any of the user's code runs
        from adjoint.torchside.importer.originrun import confined
        for path, problem, _ in jobs:
            if problem.origin is not None:
                confined(path, problem)
    note = semantics_note(version)   # another release than the one predictions follow: said in the report

    results = []
    bar = progress(len(jobs)) if progress is not None and len(jobs) >= PROGRESS_MIN_JOBS else None
    for path, problem, vp in jobs:
        results.append(verify_variant(path, problem, vp, dtype or problem.dtype, fd, origin))
        if bar is not None:
            bar.update(1, f"{problem.name}::{vp.name}")
    if bar is not None:
        bar.finish()
    elapsed = time.perf_counter() - start

    summary = _summary(results, len({r.file for r in results}), elapsed)
    if as_json:
        echo(dumps({"torch": version, "semantics": MODELLED_TORCH, "note": note,
                    "results": [r.to_json() for r in results], "summary": summary}))
    else:
        echo(f"verified against torch {version}")
        if note is not None:
            echo(note)
        echo("\n".join(render_result(r) for r in results))
        echo(summary["line"])
    return 0 if summary["ok"] else 1


def torch_version() -> str:
    """The torch version; when torch cannot be imported, one line saying what is wrong with the
    environment and how to repair it (:mod:`adjoint.torchside.torchenv`: exit 4 in the CLI)."""
    try:
        from adjoint.torchside import torch_version as version
        return version()
    except Exception as exc:
        problem = classify(exc, "adjoint verify")
        if problem is None:
            raise
        raise problem from None


def verify_variant(path: str, problem: Problem, vp, dtype: str, fd: bool, origin: bool = False) -> VariantResult:
    from adjoint.torchside import finite_differences, run_variant

    t0 = time.perf_counter()
    if problem.distributed is not None:   # DistributedDataParallel: world_size real processes, every rank compared
        from adjoint.torchside.verify_ddp import verify_ranks
        rows, observed = verify_ranks(problem, vp, dtype, fd)
        return VariantResult(problem.name, path, vp.name, dtype, rows, time.perf_counter() - t0, observed)
    decl = problem.variant(vp.name)
    predicted = predicted_json(vp, problem.loc)
    observed = run_variant(problem, decl, dtype)
    # a complex64 tensor computes in float32 whatever the file's dtype: its tolerance is float32's
    narrow = any(d.dtype == "complex64" for d in problem.all_tensors())
    if any(d.dtype in ("complex64", "complex128") for d in problem.all_tensors()):
        bounds, why = None, ("no rounding bounds for complex tensors yet (the bound backend is real); every value "
                             f"is held to {'float32' if narrow else dtype}'s fixed tolerance instead")
    else:
        bounds, why = rounding_bounds(problem, vp, dtype)
    rows = compare(predicted, observed, "float32" if narrow else dtype, bounds=bounds)
    if bounds and bounds.get("branch_points"):
        rows.append(branch_note(bounds["branch_points"]))
    if why is not None:
        rows.append(Row("bounds", "rounding bounds", True, None, None, why, skipped=True))
    if problem.origin is not None:
        if origin:
            from adjoint.torchside.importer.originrun import confined, origin_rows
            confined(path, problem)
            rows.append(origin_row(problem, decl, dtype))
            rows += origin_rows(problem, decl, predicted, dtype, bounds)
        else:
            rows.append(Row("origin", "origin's module", True, None, None,
                            "not run: verify --origin would run the Python file origin: names (your code) and "
                            "compare its graph, hook calls and grads with the prediction", skipped=True))
    if fd:
        names, skipped = fd_targets(problem, decl, vp)
        checked = finite_differences(problem, decl, names) if names else {}
        checked.update(skipped)
        fd_rows = compare_fd(predicted, checked)
        kinks = list(vp.kinks)
        for r in fd_rows:
            if not r.ok and kinks:
                # no derivative exists at a kink: PyTorch's convention is checked above, FD cannot decide
                r.ok, r.skipped = True, True
                r.detail = ("inconclusive: the forward passes a kink, where finite differences see a one-sided or "
                            f"averaged slope ({r.detail}; PyTorch's convention: {'; '.join(kinks)})")
        rows += fd_rows
    return VariantResult(problem.name, path, vp.name, dtype, rows, time.perf_counter() - t0, observed)


def adjoint_rows(problem: Problem, decl, vp, predicted: dict, dtype: str) -> list[Row]:
    """The answer's ``adjoints`` against what observing full backward (pre-)hooks are handed in a
    second torch run (:mod:`adjoint.torchside.adjoints_run`), for the calls it can observe. Not
    one of verify's rows yet: the observers change the graph, and where a module's output has
    tensor hooks, a Function marked an input dirty, or an in-place write meets their views,
    what they are handed is not the answer's definition; the test suite uses it on the files
    where it is (tests/test_adjoints_torch.py)."""
    from adjoint.torchside.adjoints_run import as_answered, comparable, observe_adjoints, repeated_inputs
    from adjoint.torchside.compare import _compare_table, tolerance

    if not predicted.get("adjoints"):
        return []
    why = None if comparable(vp) else "the variant raised, or its last backward is not a plain backward() of all " \
                                      "that requires grad"
    seen = observe_adjoints(problem, decl, dtype) if why is None else None
    if seen is None:
        return [Row("adjoints", "module adjoints", True, None, None,
                    "not compared: " + (why or "with a full backward hook on every module PyTorch runs this variant "
                                        "differently (a legacy backward hook, or an in-place write on a module's "
                                        "input or output)"), skipped=True)]
    pred, obs = as_answered(predicted["adjoints"], seen, repeated_inputs(vp))
    rtol, atol = tolerance(dtype)
    return _compare_table("adjoints", "adjoint", pred, obs, rtol, atol, dtype)


def branch_note(count: int) -> Row:
    """A note (not a comparison) that some bounds cover both sides of a decision: ``count``
    decisions were on values within PyTorch's rounding of a branch point, so a bound there can be
    as large as the values it holds, and a tight check needs inputs away from it."""
    return Row("note", "branch points", True, None, None,
               f"{count} decision{'s' if count != 1 else ''} at a branch point (a ReLU or a mask at 0, a comparison, "
               "a tie for a max) PyTorch's floats may take either way, the value being within their rounding of it: "
               "the bounds there cover both sides and can be as large as the values; move the inputs off the "
               "branch point for a tight check", skipped=True)


def rounding_bounds(problem: Problem, vp, dtype: str) -> tuple[dict | None, str | None]:
    """The variant's per-element bounds on PyTorch's rounding in ``dtype`` (the engine run on the
    bound backend: docs/verify.md), and why there are none when there are none (every float is
    then held to the dtype's fixed tolerance)."""
    run = getattr(vp, "run", None)
    if run is None or run.rt.B.name != "exact":
        return None, None   # float64 or structure predictions: compared with the fixed tolerance
    from adjoint.answer.bounds import bound_json
    try:
        return bound_json(problem, vp.name, dtype), None
    except Exception as exc:   # the bound run is a second opinion on the tolerance, never the answer
        return None, (f"no rounding bounds for this variant ({type(exc).__name__}: {exc}); every value is held to "
                      f"{dtype}'s fixed tolerance instead")


def origin_row(problem: Problem, decl, dtype: str) -> Row:
    """An imported file (``origin:``): the file's model and the user's module build the same graph."""
    from adjoint.torchside.importer.graphcheck import compare_graphs

    same, detail = compare_graphs(problem, decl, dtype)
    return Row("graph", "autograd graph = origin's module", same, None, None, detail)


def fd_targets(problem: Problem, decl, vp) -> tuple[list[str], dict[str, str]]:
    """Which final gradients central differences can check, and why the others are skipped.

    FD measures the true derivative of the (hooked) forward; a backward hook that returns a
    replacement, or a custom Function whose declared backward is not its true VJP, makes
    ``.grad`` differ from it on purpose. An FD disagreement where the forward passes a kink
    (relu, abs, sqrt, norm at 0, ``x ** 0``; the prediction notes them) is reported as
    inconclusive rather than as a mismatch: the derivative does not exist there."""
    changing = [h for h in decl.hooks if h.returns is not None and _fires_in_backward(h)]
    bw = decl.backward
    if bw.method == "grad" or bw.inputs:
        wanted = [n for n, _ in bw.inputs]
    else:
        wanted = list(vp.grads)
    whole = _not_one_function(decl, vp)
    if whole is not None:
        return [], {n: whole for n in wanted} if wanted else {"(every gradient)": whole}
    leaves = {d.name for d in list(decl.inputs) + [d for m in problem.model.walk() for d in m.params]
              if d.requires_grad}
    skipped: dict[str, str] = {}
    if changing:
        reason = (f"hook {changing[0].index} ('{changing[0].label}') returns a replacement gradient, so this "
                  "gradient is not the derivative finite differences measure")
        return [], {n: reason for n in wanted}
    wrong = [f for f in vp.functions if not f.matches]
    if wrong:
        reason = (f"the custom Function {wrong[0].name} declares a backward for '{wrong[0].slot}' that is not its "
                  "true derivative")
        return [], {n: reason for n in wanted}
    names = []
    for n in wanted:
        if n in leaves:
            names.append(n)
        else:
            skipped[n] = "not a leaf: finite differences perturb leaves (inputs and parameters) only"
    return names, skipped


def _not_one_function(decl, vp) -> str | None:
    """Why the final gradients are not the derivative of one forward (None when they are)."""
    if vp.error is not None:
        return "PyTorch raises while running this variant (the prediction is an error): no gradients to check"
    if decl.steps is not None:
        return ("the variant runs steps (several passes, accumulation, SGD): its final gradients are not the "
                "derivative of one forward")
    for h in decl.hooks:
        if h.on in ("saved_tensors", "saved") and not (_is_x(h.pack) and _is_x(h.unpack)):
            return (f"hook {h.index} ('{h.label}') changes the tensors backward uses (its pack/unpack are not the "
                    "identity), so the gradients are not the derivative finite differences measure")
    return None


def _is_x(e) -> bool:
    from adjoint.format.syntax import Name
    return isinstance(e, Name) and e.id == "x"


def _fires_in_backward(h) -> bool:
    """Can this hook change a gradient? Forward-phase hooks cannot; a module hook registered after
    the forward never fires; a tensor or node hook removed before backward never fires (a module
    backward hook removed then still does: the forward captured it)."""
    if h.on == "module":
        return h.kind not in ("forward", "forward_pre") and h.when != "after_forward"
    return h.remove != "before_backward"


# ----------------------------------------------------------------------------- reporting

def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.2e}"


def render_result(r: VariantResult) -> str:
    rtol, atol = tolerance(r.dtype)
    if any(row.bound is not None for row in r.rows):
        held = f"|diff| <= each element's bound on PyTorch's rounding (at least {FLOOR_ULPS} ulps)"
        if any(row.fallback for row in r.rows):
            held += f"; where none, {atol:g} + {rtol:g}*max|predicted| per tensor"
    else:
        held = f"|diff| <= {atol:g} + {rtol:g}*max|predicted| per tensor"
    head = f"== {r.problem} :: {r.variant}  [{r.dtype}, {held}]  {'PASS' if r.ok else 'FAIL'}  ({r.file}, {r.seconds:.2f}s)"
    value_rows = [row for row in r.rows if row.section == "values"]
    aggregate = f"forward values ({sum(row.ok for row in value_rows)} of {len(value_rows)} tensors)"
    width = max([len(_item(row)) for row in r.rows] + [len("what"), len(aggregate) if value_rows else 0])
    lines = [head, f"   {'what':<{width}}  {'max |diff|':>10}  {'max rel':>9}  result"]
    for row in r.rows:
        if row.section == "values" and row.ok or row.section == "note":
            continue
        lines.append(_line(row, width))
    if value_rows:
        good = [row for row in value_rows if row.ok]
        if good:
            agg = Row("values", aggregate, True,
                      _max(row.max_abs for row in good), _max(row.max_rel for row in good),
                      bound=_max(row.bound for row in good), fallback=any(row.fallback for row in good))
            lines.append(_line(agg, width))
    lines += [f"   note: {row.detail}" for row in r.rows if row.section == "note"]
    if any(row.section == "fd" for row in r.rows):
        frtol, fatol = FD_TOLERANCE
        lines.append(f"   (fd: central differences in float64, eps 1e-6, |diff| <= {fatol:g} + {frtol:g}*|predicted|)")
    return "\n".join(lines) + "\n"


def _item(row: Row) -> str:
    return row.item if row.section != "values" else f"{row.item}"


def _line(row: Row, width: int) -> str:
    result = "skipped" if row.skipped else ("ok" if row.ok else "MISMATCH")
    if row.ok and not row.skipped and row.bound is not None:
        result = f"ok, within PyTorch's rounding (bound {row.bound:.2e})"
        if row.fallback:
            result += " and the fixed tolerance"
    line = f"   {_item(row):<{width}}  {_fmt(row.max_abs):>10}  {_fmt(row.max_rel):>9}  {result}"
    if row.detail and (not row.ok or row.skipped):
        line += f"\n   {'':<{width}}    -> {row.detail}"
    return line


def _max(xs) -> float | None:
    xs = [x for x in xs if x is not None]
    return max(xs) if xs else None


def _summary(results: list[VariantResult], n_files: int, elapsed: float) -> dict:
    passed = sum(r.ok for r in results)
    failed = len(results) - passed
    rows = sum(not row.skipped for r in results for row in r.rows)
    bad = sum(not row.ok for r in results for row in r.rows)
    dtypes = sorted({r.dtype for r in results})
    failing = [f"{r.problem}::{r.variant}" for r in results if not r.ok]
    line = (f"{'OK' if not failed else 'FAILED'}: {n_files} problem{'s' if n_files != 1 else ''}, "
            f"{len(results)} variant{'s' if len(results) != 1 else ''} ({', '.join(dtypes)}): {passed} passed, "
            f"{failed} failed; {rows} comparisons, {bad} mismatch{'es' if bad != 1 else ''}; {elapsed:.2f}s")
    if failing:
        line += f"; failing: {', '.join(failing[:10])}" + (" ..." if len(failing) > 10 else "")
    return {"ok": failed == 0, "problems": n_files, "variants": len(results), "passed": passed, "failed": failed,
            "comparisons": rows, "mismatches": bad, "seconds": round(elapsed, 3), "line": line}


