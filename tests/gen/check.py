"""The differential check: solve exactly, run in real PyTorch, compare."""

from __future__ import annotations

from dataclasses import dataclass, field

#: Per-variant outcomes, worst first. The first four are disagreements between adjoint and
#: PyTorch (or a bug of the harness); the rest are fine.
BAD = ("crash", "harness", "invalid", "refused", "mismatch", "timeout")
GOOD = ("ok", "both_raise", "nonfinite", "f32_rounding", "f64_rounding", "overflow", "torch_crashes")
#: the start of solve's refusal of a problem PyTorch itself crashes on (adjoint.engine.hook_registration)
CRASH_REFUSAL = "PyTorch 2.13 crashes (segmentation fault)"
FLOAT_MAX = {"float32": 3.4028234663852886e38, "float64": 1.7976931348623157e308}
#: Half the smallest float32 subnormal (2 ** -150): a nonzero exact value below it is 0 in PyTorch's
#: float32 (an underflow: sigmoid(-110), then sqrt's backward at that 0 is inf, then nan)
FLOAT32_UNDERFLOW = 2.0 ** -150


@dataclass
class Outcome:
    """What one problem gave: per variant (name, status, detail), and the time it took."""

    variants: list = field(default_factory=list)
    seconds: float = 0.0
    solve_seconds: float = 0.0

    @property
    def status(self) -> str:
        found = {st for _, st, _ in self.variants}
        for st in BAD + ("overflow", "f64_rounding", "f32_rounding", "both_raise", "nonfinite", "ok"):
            if st in found:
                return st
        return "ok"

    @property
    def ok(self) -> bool:
        return all(st in GOOD for _, st, _ in self.variants)

    def report(self) -> str:
        return "\n".join(f"{name}: {st}" + (f": {detail}" if detail else "") for name, st, detail in self.variants)


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout()


def check(text: str, timeout: float = 30.0) -> Outcome:
    """Solve every variant exactly, run it in real PyTorch (adjoint.torchside) and compare.

    Per variant: ``ok`` (every compared item within verify's per-element rounding bounds,
    docs/verify.md; the fixed tolerance where none), ``mismatch``
    (some item differs, or PyTorch raised where the prediction runs), ``nonfinite`` (solve
    refuses a non-finite forward: PyTorch would carry inf/nan on, nothing to compare),
    ``both_raise`` (solve predicts PyTorch's error, and PyTorch raises exactly it: type, message,
    ``during``, ``after_call`` and every hook call before it), ``f32_rounding`` /
    ``f64_rounding`` (a run is off by more than compare's tolerance for its dtype, and every
    such element is off at least 1000 times more in float32 than in float64: PyTorch's
    rounding through an ill-conditioned op, such as 1 - tanh(x)^2 at a saturated tanh, not a
    modelling error; in float32 also an element that overflowed to inf on the way, where the
    float64 run is finite and right; in float64 also rounding both precisions do alike, when
    ``solve --float64`` gives PyTorch's float64 run on every item), ``overflow`` (the variant disagrees, and some exact forward value is
    finite but beyond the dtype's range: PyTorch overflowed to inf, then maybe nan),
    ``refused`` (solve raises a
    ProblemError but PyTorch runs, or raises: its error is an answer, never a refusal), ``torch_crashes`` (solve refuses because PyTorch crashes
    there, and the torch side, run in a child process, does die of a signal), ``invalid`` (the file does not even load: a generator
    bug), ``crash`` (a traceback from adjoint), ``harness`` (a traceback from the torch side
    or the comparison), ``timeout`` (solve and compare took longer than ``timeout`` seconds)."""
    import signal
    import time
    import traceback
    import warnings

    import adjoint
    from adjoint.torchside.compare import compare
    from adjoint.format.errors import ProblemError
    from adjoint.torchside import run_variant

    out = Outcome()
    start = time.perf_counter()
    try:
        problem = adjoint.loads(text, name="<generated>")
    except ProblemError as exc:
        out.variants.append(("*", "invalid", str(exc)))
        return out
    except Exception:
        out.variants.append(("*", "crash", traceback.format_exc(limit=-4)))
        return out
    old = signal.signal(signal.SIGALRM, _alarm)
    try:
        for v in problem.variants:
            signal.setitimer(signal.ITIMER_REAL, timeout)
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    out.variants.append((v.name,) + _check_variant(problem, v, compare, run_variant, out, text))
            except _Timeout:
                out.variants.append((v.name, "timeout", f"over {timeout:g}s"))
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
    finally:
        signal.signal(signal.SIGALRM, old)
    out.seconds = time.perf_counter() - start
    return out


def _beyond_range(tree, dtype: str) -> bool:
    """Does some exact VALUE in the predicted JSON fall outside the dtype's finite range?"""
    import math

    if isinstance(tree, dict):
        if "exact" in tree and "value" in tree:
            floats, exact = tree["value"], tree["exact"]

            def walk(f, e):
                if isinstance(f, list):
                    return any(walk(a, b) for a, b in zip(f, e))
                if f is None:
                    return False
                if e in ("inf", "-inf", "nan"):
                    return False
                # an exact value beyond the range prints as +-inf; a nan decimal beside a finite
                # exact value is adjoint's own inconsistency, never PyTorch's overflow (seed 89213,
                # problems 801 and 1087: a power of a decided zero printed nan)
                return math.isinf(f) or abs(f) > FLOAT_MAX[dtype]

            return walk(floats, exact)
        return any(_beyond_range(v, dtype) for v in tree.values())
    if isinstance(tree, list):
        return any(_beyond_range(v, dtype) for v in tree)
    return False


def _torch_crashes(text: str, variant: str) -> bool:
    """Run the torch side of one variant in a child process: does it die of a signal?"""
    import subprocess
    import sys

    code = ("import sys, adjoint\nfrom adjoint.torchside import run_variant\n"
            "p = adjoint.loads(sys.stdin.read(), name='<generated>')\n"
            "run_variant(p, p.variant(sys.argv[1]), p.dtype)\n")
    done = subprocess.run([sys.executable, "-c", code, variant], input=text, capture_output=True, text=True,
                          timeout=300)
    return done.returncode < 0


def _check_variant(problem, v, compare, run_variant, out: Outcome, text: str):
    import time
    import traceback

    from adjoint.format.errors import ProblemError

    t0 = time.perf_counter()
    try:
        vp = problem.solve(variant=v.name).variants[0]
        predicted = vp.to_json()
    except _Timeout:
        raise
    except ProblemError as exc:
        out.solve_seconds += time.perf_counter() - t0
        message = str(exc)
        if "forward pass stays finite" in message:
            return "nonfinite", message
        if CRASH_REFUSAL in message:
            if _torch_crashes(text, v.name):
                return "torch_crashes", message
            return "refused", f"solve refuses ({message}) but PyTorch runs it in a child process"
        try:
            observed = run_variant(problem, v, problem.dtype)
        except ProblemError as torch_exc:
            return "invalid", f"solve: {message}; torch side: {torch_exc}"
        except _Timeout:
            raise
        except Exception:
            return "harness", traceback.format_exc(limit=-4)
        if observed.get("error"):   # PyTorch's error is an answer: refusing it is a disagreement
            return "refused", f"solve refuses ({message}) where PyTorch raises {observed['error']}"
        return "refused", f"solve refuses ({message}) but PyTorch runs"
    except Exception:
        return "crash", traceback.format_exc(limit=-6)
    out.solve_seconds += time.perf_counter() - t0
    try:
        observed = run_variant(problem, v, problem.dtype)
        rows = compare(predicted, observed, problem.dtype, bounds=_bounds(problem, v))
    except _Timeout:
        raise
    except Exception:
        return "harness", traceback.format_exc(limit=-4)
    bad = [r for r in rows if not r.ok]
    if not bad and predicted.get("error"):
        # the predicted error is PyTorch's: type, exact message, during, after_call, and every
        # hook call before it (compare's run and hook_calls rows)
        return "both_raise", f"{predicted['error']['type']}: {predicted['error']['message']}"
    if bad:
        detail = "; ".join(f"{r.item}: {r.detail}" for r in bad[:6])
        if _beyond_range(predicted, problem.dtype) or _forward_beyond_range(vp, problem.dtype):
            # an exact value (finite) is beyond the dtype's range: PyTorch's floats overflow to
            # inf and then make nan (inf - inf, 0 * inf), which no exact prediction can follow
            return "overflow", detail
        if any("rounding of this element" in r.detail for r in bad):
            # an element beyond its own bound on PyTorch's rounding (verify's: docs/verify.md): the
            # bound is sound (underflow, error products, the kernels' own errors), so rounding does
            # not explain it, whatever the other precision does (seed 50002, problems 632, 1564) --
            # except where a decision on a value (a pooling window's argmax between equal exact
            # values) went the other way in PyTorch's rounding, which the bound assumes it does
            # not: the same engine on float64 numbers (solve --float64) then takes PyTorch's side
            # and agrees with its float64 run everywhere (seed 70004, problem 1663)
            if problem.dtype == "float64" and not any(r.section == "run" for r in bad) and \
                    _float64_engine_agrees(problem, v, observed, compare):
                return "f64_rounding", detail
            return "mismatch", detail
        if not any(r.section == "run" for r in bad):   # no error, or the predicted one (seed 127, problem 839)
            # The prediction is exact; PyTorch's rounding grows through ill-conditioned ops
            # (1 - tanh(x)^2 at a saturated tanh, sin of a large argument). Rerun in the other
            # precision: rounding error scales with it (~5e8 between float32 and float64), a
            # modelling error does not.
            other = "float64" if problem.dtype == "float32" else "float32"
            try:
                observed_other = run_variant(problem, v, other)
            except _Timeout:
                raise
            except Exception:
                return "harness", traceback.format_exc(limit=-4)
            lo, hi = (observed, observed_other) if problem.dtype == "float32" else (observed_other, observed)
            if _rounding_explains(predicted, observed, lo, hi, problem.dtype):
                return ("f32_rounding" if problem.dtype == "float32" else "f64_rounding"), detail
            # Rounding both precisions do alike (0.5 absorbed beside 5.6e17, a tanh or sigmoid
            # saturated to 1, so a difference or a kink's side is decided by a rounded zero): the
            # same engine on float64 numbers (solve --float64) then gives PyTorch's float64 run
            # everywhere, and the exact answer is what rounding lost (seed 83, problem 842; seed
            # 137, problem 117; seed 139, problem 326). Only a fault of the exact value backend
            # alone would hide here too; tests/test_modes.py compares the backends on every file.
            if problem.dtype == "float64" and _float64_engine_agrees(problem, v, observed, compare):
                return "f64_rounding", detail
            # The same in float32, where both precisions round a value to the same non-finite end
            # (sigmoid(-12342) is 0 in floats of either width, so sqrt's backward there is inf,
            # then nan; exactly it is about 1e-5360): solve --float64 gives PyTorch's float64 run
            # everywhere, and each element float32 gets wrong is either non-finite as in the float64
            # run or rounding as above (seed 81002, problem 764)
            if problem.dtype == "float32" and _float64_engine_agrees(problem, v, observed_other, compare) and \
                    _rounding_explains(predicted, observed, lo, hi, problem.dtype, alike=True):
                return "f32_rounding", detail
            # Rounding carried across an SGD step: PyTorch's pass-1 gradients agree within their
            # bounds, but ``p -= lr * grad`` can turn their rounding into a large relative error in
            # small weights, which the next pass carries on where its bounds are too loose to use
            # (seed 89175, problem 1507). Rerun PyTorch with each stepped parameter set, right after
            # the step, to the exact post-step value in the dtype: if PyTorch's own step made those
            # values up to rounding, and from them every item agrees, the exact answer is right.
            if _rounding_across_steps(problem, v, vp, predicted, compare, run_variant):
                return ("f32_rounding" if problem.dtype == "float32" else "f64_rounding"), \
                    f"rounding carried across a step: {detail}"
        return "mismatch", detail
    return "ok", ""


def _bounds(problem, v) -> dict | None:
    """The variant's bounds on PyTorch's rounding (verify's: docs/verify.md), None when the bound
    run fails (the fixed tolerance then holds; the differential check itself stays the judge)."""
    from adjoint.answer.bounds import bound_json

    try:
        return bound_json(problem, v.name, problem.dtype)
    except _Timeout:
        raise
    except Exception:
        return None


def _float64_engine_agrees(problem, v, observed: dict, compare) -> bool:
    """Does ``solve --float64`` of this variant match PyTorch's float64 run on every item?"""
    from adjoint.format.errors import ProblemError

    try:
        approx = problem.solve(variant=v.name, mode="float64").variants[0].to_json()
    except ProblemError:
        return False
    return all(r.ok for r in compare(approx, observed, "float64"))


def _rounding_across_steps(problem, v, vp, predicted: dict, compare, run_variant) -> bool:
    """Do PyTorch's SGD steps make the exact post-step parameters up to rounding (each element
    within 1e-6 (float64) or 1e-3 (float32) of the parameter's largest magnitude before or after
    the step: a modelling error of the step would be far beyond), and does PyTorch's run, started again from those exact
    values right after each step, agree with the prediction on every item?"""
    import math

    run = getattr(vp, "run", None)
    # plain SGD steps and torch.optim steps over model.parameters() (Adam's g / (sqrt(v) + eps)
    # turns a gradient PyTorch rounds to 1e-17 where it is exactly 0 into an update of lr * 1e-9)
    updates = {**(getattr(run, "updates", None) or {}), **(getattr(run, "__dict__", {}).get("optimizer_updates") or {})}
    if not updates:
        return False
    after = {}
    scale = {}
    for index, rows in updates.items():
        after[index] = {}
        for name, before, grad, value in rows:
            if not all(hasattr(x, "floats") for x in (before, grad, value)):
                return False
            after[index][name] = value.floats()
            magnitudes = [abs(f) for f in _flat(value.floats()) + _flat(before.floats()) if f is not None]
            scale[(index, name)] = max(magnitudes + [1e-300])
    observed = run_variant(problem, v, problem.dtype, after_step=after)
    tol = 1e-6 if problem.dtype == "float64" else 1e-3
    for index, params in (observed.get("stepped") or {}).items():
        for name, got in params.items():
            want = _flat(after[index][name])
            have = _flat(got["value"])
            if len(want) != len(have):
                return False
            for a, b in zip(want, have):
                if not (math.isfinite(a) and math.isfinite(b)) or abs(a - b) > tol * scale[(index, name)]:
                    return False
    if set(observed.get("stepped") or {}) != set(after):
        return False
    return all(r.ok for r in compare(predicted, observed, problem.dtype, bounds=_bounds(problem, v)))


def _forward_beyond_range(vp, dtype: str) -> bool:
    """Does an exact forward value (named or not) fall beyond the dtype's finite range, or (float32)
    below it: nonzero, yet 0 once rounded to the dtype? An element that is inf or nan exactly (a
    ``-inf`` mask given in the file, what follows from it) is no overflow: a disagreement beside it
    is a mismatch."""
    import math

    run = getattr(vp, "run", None)
    fwd = getattr(vp, "forward", None) or (run.forwards[-1] if getattr(run, "forwards", None) else None)
    values = getattr(fwd, "values", None) or []
    for value in (values.values() if isinstance(values, dict) else values):
        if value is None or not hasattr(value, "floats"):
            continue
        floats = _flat(value.floats())
        special = None   # the elements whose exact value is itself inf or nan (a -inf mask the file gives)
        for i, f in enumerate(floats):
            if f is not None and (math.isinf(f) or math.isnan(f)):
                if special is None:
                    special = [t in ("inf", "-inf", "nan") for t in value.strings_flat()]
                if not special[i]:   # a finite exact value whose float is not: PyTorch overflowed
                    return True
            elif f is not None and abs(f) > FLOAT_MAX[dtype]:
                return True
            if f is not None and dtype == "float32" and 0 < abs(f) <= FLOAT32_UNDERFLOW:
                return True   # below the range: PyTorch's float32 holds 0 there
    return False


def _flat(x) -> list:
    if isinstance(x, list):
        out = []
        for y in x:
            out.extend(_flat(y))
        return out
    return [x]


def _aligned(p, o, path=""):
    """(where, predicted VALUE, observed VALUE) for every tensor both JSON sides hold at one place."""
    if isinstance(p, dict) and "shape" in p and "value" in p:
        if isinstance(o, dict) and "value" in o:
            yield path, p, o
        return
    if isinstance(p, dict) and isinstance(o, dict):
        for k in p:
            if k in o:
                yield from _aligned(p[k], o[k], f"{path}/{k}")
    elif isinstance(p, list) and isinstance(o, list) and len(p) == len(o):
        for i, (a, b) in enumerate(zip(p, o)):
            yield from _aligned(a, b, f"{path}/{i}")


def _rounding_explains(predicted: dict, observed: dict, lo: dict, hi: dict, dtype: str, alike: bool = False) -> bool:
    """Is every element ``observed`` gets wrong (beyond compare's fixed tolerance for ``dtype``:
    only elements without a rounding bound come here, a bounded element beyond its bound is a
    mismatch) wrong because of rounding: the float32 run (``lo``) at least 1000 times further from the
    exact value than the float64 run (``hi``), or, in a float32 run, an element that overflowed to
    inf or nan on the way where the float64 run stays finite and within its tolerance? With ``alike``
    (the caller has checked that solve --float64 gives the float64 run), also a float32 element
    non-finite as the float64 run's is (the same nan, the same infinity)."""
    import math

    from adjoint.torchside.compare import tolerance

    if len(predicted.get("hook_calls") or []) != len(observed.get("hook_calls") or []):
        return False
    rtol, atol = tolerance(dtype)
    lo_at = {w: o for w, _, o in _aligned(predicted, lo)}
    hi_at = {w: o for w, _, o in _aligned(predicted, hi)}
    found = False
    for where, p, o in _aligned(predicted, observed):
        pf, of = _flat(p["value"]), _flat(o["value"])
        if len(pf) != len(of) or any(x is None for x in pf):
            return False
        scale = max([abs(x) for x in pf if math.isfinite(x)], default=0.0)
        for i, (a, b) in enumerate(zip(pf, of)):
            if not (math.isfinite(a) and math.isfinite(b)):
                if a == b or (math.isnan(a) and math.isnan(b)):
                    continue
                if dtype == "float32" and math.isfinite(a) and where in hi_at:
                    hv = _flat(hi_at[where]["value"])
                    if alike and len(hv) == len(pf) and hv[i] is not None and not math.isfinite(hv[i]) and \
                            (hv[i] == b or (math.isnan(hv[i]) and math.isnan(b))):
                        found = True  # non-finite in both precisions alike (seed 81002, problem 764)
                        continue
                    r64, a64 = tolerance("float64")
                    if len(hv) == len(pf) and math.isfinite(hv[i]) and abs(hv[i] - a) <= a64 + r64 * scale:
                        found = True  # a float32 intermediate overflowed (seed 107, problem 1864)
                        continue
                return False          # inf vs -inf, nan vs a number: not rounding
            if abs(a - b) <= atol + rtol * scale:
                continue
            found = True
            if where not in lo_at or where not in hi_at:
                return False
            lv, hv = _flat(lo_at[where]["value"]), _flat(hi_at[where]["value"])
            if len(lv) != len(pf) or len(hv) != len(pf) or not (math.isfinite(lv[i]) and math.isfinite(hv[i])):
                return False
            if abs(lv[i] - a) < 1000 * abs(hv[i] - a):
                return False
    return found
