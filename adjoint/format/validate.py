"""Problem file -> validated records (contract v1 and v2; the user-facing reference is docs/format.md).

``build_problem`` turns the located YAML tree into the records of :mod:`adjoint.format.problem`.
Every mistake is a ProblemError at the offending node, and every *independent* mistake of
a file is reported, in file order (:class:`adjoint.format.errors.ProblemErrors`): top-level keys,
modules (:mod:`adjoint.format.validate_modules`), hooks, variants and steps
(:mod:`adjoint.format.validate_hooks`) are checked one by one, and checks that depend on a part
that failed are skipped, so one mistake is one line. Names and shapes inside expressions
are checked when the model runs, which needs the module tree built here.
"""

from __future__ import annotations

import functools

from fractions import Fraction

from adjoint.format.checks import FAILED, NAME_RE, Issues, choice, identifier, missing_keys, string, suggest, unknown_keys
from adjoint.format.errors import Loc, ProblemError, raise_all
from adjoint.format.expr import parse_expression
from adjoint.format.literals import check_range, check_symbol_value, parse_int, parse_number, show_text, symbol_name_problem
from adjoint.format.loader import YMap, YNode, YScalar, kind_name
from adjoint.format.problem import OUTPUT, ROOT, Module, Problem, Sym, TensorDecl, Variant
from adjoint.format.validate_hooks import check_step_hooks, parse_backward, parse_hooks, parse_steps
from adjoint.format.validate_modules import ModuleBuilder
from adjoint.format.validate_origin import read_origin
from adjoint.format.validate_tensors import tensor_decl, tensor_table
from adjoint.format.validate_output import check_output_name

TOP_KEYS = ("name", "inputs", "model", "description", "targets", "loss", "hooks", "variants", "backward",
            "symbols", "dtype", "init", "steps", "origin")
VARIANT_KEYS = ("hooks", "inputs", "backward", "description", "steps")
INPUT_KEYS = ("requires_grad", "scale", "dtype")
DTYPES = ("float32", "float64")


def input_decl(name: str, node: YNode, loc: Loc, float_dtype: str | None = None) -> TensorDecl:
    """An input; ``float_dtype``: the file's, which its ``dtype:`` may name (a no-op)."""
    return tensor_decl(name, node, loc, f"input '{name}'", False, INPUT_KEYS, created=True, float_dtype=float_dtype)


def target_decl(name: str, node: YNode, loc: Loc, float_dtype: str | None = None) -> TensorDecl:
    return tensor_decl(name, node, loc, f"target '{name}'", False, ("scale", "dtype"), created=True,
                       float_dtype=float_dtype)


def build_problem(tree: YNode, path: str) -> Problem:
    if not isinstance(tree, YMap):
        raise ProblemError(tree.loc, f"the problem file must be a mapping, not {kind_name(tree)}")
    if tree.get("distributed") is not None:   # each rank's file, validated as an ordinary one
        from adjoint.format.distributed import build_distributed   # loaded when a file has the block

        return build_distributed(tree, path, build_problem)
    issues = Issues()
    top = tree
    unknown = unknown_keys(top, "the problem file", TOP_KEYS)
    for err in unknown or missing_keys(top, "the problem file", ("name", "inputs", "model")):
        issues.add(err)

    def part(key: str, fn, *args):
        return FAILED if top.get(key) is None else issues.attempt(fn, top.get(key), *args)

    name = part("name", _problem_name)
    description = part("description", string, "description") if top.get("description") is not None else ""
    dtype = part("dtype", choice, "dtype", DTYPES) if top.get("dtype") is not None else "float32"
    seed = part("init", _init_seed) if top.get("init") is not None else None
    origin = part("origin", read_origin, path) if top.get("origin") is not None else None
    symbols = part("symbols", _symbols, issues) if top.get("symbols") is not None else {}
    own = None if dtype is FAILED else dtype
    inputs_of = functools.partial(input_decl, float_dtype=own)
    targets_of = functools.partial(target_decl, float_dtype=own)
    inputs = part("inputs", _inputs, inputs_of, issues)
    builder = ModuleBuilder(issues, None if seed is FAILED else seed, top.get("init") is not None)
    model = part("model", builder.module, "", ROOT, True, False)
    if model is not FAILED:
        from adjoint.format.tying import resolve_ties
        model = issues.attempt(resolve_ties, model)
    if model is FAILED:
        builder.complete = False
    targets = part("targets", lambda n: tuple(tensor_table(n, "targets", targets_of, issues))) \
        if top.get("targets") is not None else ()
    loss = part("loss", parse_expression, "the loss") if top.get("loss") is not None else None
    hooks = part("hooks", parse_hooks, "hooks", issues) if top.get("hooks") is not None else ()
    backward = part("backward", parse_backward, None) if top.get("backward") is not None else parse_backward(None, None)
    input_names = tuple(k.text for k, _ in top.get("inputs").entries) if isinstance(top.get("inputs"), YMap) else ()
    steps = None
    if top.get("steps") is not None:
        steps = issues.attempt(parse_steps, top.get("steps"), "steps", backward if backward is not FAILED else
                               parse_backward(None, None), inputs_of, input_names, issues)

    variants = issues.attempt(_variants, top.get("variants"), inputs, hooks, backward, steps, input_names, inputs_of,
                              issues)
    if model is not FAILED and variants is not FAILED and builder.complete:
        from adjoint.format.validate_step_extras import check_step_modules
        issues.attempt(check_step_modules, model, variants)
    if not unknown:
        issues.attempt(_cross_checks, inputs, targets, model, builder.complete, top.get("loss") is not None, variants)
    range_dtype = dtype if dtype is not FAILED else "float64"
    issues.attempt(_range_checks, range_dtype, inputs, targets, model, variants, symbols, top.get("symbols"))
    issues.attempt(_gradient_literals_name_no_tensor, inputs, targets, variants)
    issues.raise_if_any()
    return Problem(name, description, path, model, targets, loss, tuple(variants), symbols, dtype, top.loc,
                   init_seed=seed, origin=origin)


# ----------------------------------------------------------------------------- top-level keys

def _problem_name(node: YNode) -> str:
    """The name as written: ``name: 123``, ``on`` or ``null`` is a number, a boolean or an empty
    value to YAML, but the text matches the contract's pattern, so it names the problem as text."""
    name = node.text if isinstance(node, YScalar) and node.kind != "str" else string(node, "name")
    if not NAME_RE.fullmatch(name):
        raise ProblemError(node.loc, f"name {show_text(name)} must match [a-z0-9_-]+ (lower case, digits, _ and -)")
    return name


def _init_seed(node: YNode) -> int:
    if not isinstance(node, YMap):
        raise ProblemError(node.loc, f"init must be a mapping {{seed: N}}, not {kind_name(node)}")
    for key, _ in node.entries:
        if key.text != "seed":
            raise ProblemError(key.loc, f"unknown key '{key.text}' in init{suggest(key.text, ['seed'])} (allowed: seed)")
    if node.get("seed") is None:
        raise ProblemError(node.loc, "init is missing the required key 'seed'; write init: {seed: 0}")
    return parse_int(node.get("seed"), "the seed of init", 0, 2 ** 64 - 1)


def _symbols(node: YNode, issues: Issues) -> dict[str, Fraction]:
    if not isinstance(node, YMap):
        raise ProblemError(node.loc, "symbols must be a mapping NAME: number")
    out: dict[str, Fraction] = {}
    failed = False
    for key, value in node.entries:
        why = symbol_name_problem(key.text)
        if why is not None:
            issues.add(ProblemError(key.loc, why))
            failed = True
            continue
        number = issues.attempt(parse_number, value, f"symbol '{key.text}'")
        if number is FAILED:
            failed = True
        else:
            out[key.text] = number
    return FAILED if failed else out


def _inputs(node: YNode, input_of, issues: Issues):
    before = len(issues.errors)
    decls = tensor_table(node, "inputs", input_of, issues)
    if len(issues.errors) > before:
        return FAILED
    if not decls:
        raise ProblemError(node.loc, "inputs is empty; the model needs at least one input tensor")
    return tuple(decls)


# ----------------------------------------------------------------------------- variants

def _variants(vnode: YNode | None, inputs, hooks, backward, steps, input_names, input_of, issues: Issues):
    if vnode is None:
        if FAILED in (inputs, hooks, backward, steps):
            return FAILED
        check_step_hooks(steps or (), hooks, "steps", "the problem")
        return [Variant("default", inputs, hooks, backward, None, steps)]
    if not isinstance(vnode, YMap) or not vnode.entries:
        raise ProblemError(vnode.loc, "variants must be a non-empty mapping NAME: {hooks, inputs, backward}")
    out = []
    for key, value in vnode.entries:
        out.append(issues.attempt(_variant, key, value, inputs, hooks, backward, steps, input_names, input_of, issues))
    return FAILED if any(v is FAILED for v in out) else out


def _variant(key: YScalar, node: YNode, inputs, hooks, backward, steps, input_names, input_of,
             issues: Issues) -> Variant:
    if not key.text:   # any other text names a variant, as written (Full, with.dot, 1, on): it is only a label
        raise ProblemError(key.loc, "a variant name is empty; name it, e.g. full")
    what = f"variant {show_text(key.text)}"
    if isinstance(node, YScalar) and node.kind == "null":
        node = YMap(node.loc, ())
    if not isinstance(node, YMap):
        raise ProblemError(node.loc, f"{what} must be a mapping, not {kind_name(node)}")
    raise_all(unknown_keys(node, what, VARIANT_KEYS))
    v = node

    def own(key_: str, fn, *args):
        return issues.attempt(fn, v.get(key_), *args)

    description = own("description", string, f"the description of {what}") if v.get("description") else ""
    vin = own("inputs", _variant_inputs, inputs, what, input_names, input_of) if v.get("inputs") is not None \
        else inputs
    vhooks = own("hooks", parse_hooks, f"the hooks of {what}", issues) if v.get("hooks") is not None else hooks
    vback = backward
    if v.get("backward") is not None:
        vback = own("backward", parse_backward, backward if backward is not FAILED else None)
    vsteps = steps
    if v.get("steps") is not None:
        base = vback if vback is not FAILED else parse_backward(None, None)
        vsteps = own("steps", parse_steps, f"the steps of {what}", base, input_of, input_names, issues)
    parts = (description, vin, vhooks, vback, vsteps)
    if any(p is FAILED for p in parts):
        return FAILED
    check_step_hooks(vsteps or (), vhooks, "steps" if v.get("steps") is None else f"the steps of {what}", what)
    return Variant(key.text, vin, vhooks, vback, key.loc, vsteps, description)


def _variant_inputs(node: YNode, inputs, what: str, input_names, input_of) -> tuple[TensorDecl, ...]:
    if not isinstance(node, YMap):
        raise ProblemError(node.loc, f"the inputs of {what} must be a mapping NAME: tensor, not {kind_name(node)}")
    errors = []
    changed: dict[str, TensorDecl] = {}
    for key, value in node.entries:
        try:
            name = identifier(key, "tensor name")
            if name not in input_names:
                raise ProblemError(key.loc, f"{what} sets input '{name}', which the problem does not declare"
                                            f"{suggest(name, input_names)}; a variant can only change declared inputs "
                                            f"({', '.join(input_names)})")
            changed[name] = input_of(name, value, key.loc)
        except ProblemError as err:
            errors.append(err)
    raise_all(errors)
    if inputs is FAILED:
        return FAILED
    return tuple(changed.get(d.name, d) for d in inputs)


# ----------------------------------------------------------------------------- whole-file checks

def _cross_checks(inputs, targets, model, model_complete: bool, has_loss: bool, variants) -> None:
    errors: list[ProblemError] = []
    if FAILED not in (inputs, targets, model):
        try:
            check_output_name(model, has_loss)
            _check_name_clashes(inputs, targets, model, has_loss)
        except ProblemError as err:
            errors.append(err)
    if model is not FAILED and model_complete and variants is not FAILED:
        from adjoint.format.submodules import builtin_submodules
        paths = [m.label for m in model.walk()] + builtin_submodules(model)
        for v in variants:
            for hook in v.hooks:
                if hook.on == "module" and hook.target not in paths:
                    errors.append(ProblemError(hook.loc, f"hook target module '{hook.target}' does not exist"
                                                         f"{suggest(hook.target, paths)}; modules: {', '.join(paths)}"))
                elif hook.on == "module" and any(m.plain for m in model.walk() if m.label == hook.target):
                    errors.append(ProblemError(hook.loc, f"'{hook.target}' is a plain function (plain: true), not an "
                                                         "nn.Module: it has no module hooks"))
                for p in hook.scope or ():
                    if p not in paths:
                        errors.append(ProblemError(hook.loc, f"the scope of hook {hook.index} names '{p}', which is not "
                                                             f"a module{suggest(p, paths)}; modules: {', '.join(paths)}"))
    raise_all(errors)


def _check_name_clashes(inputs, targets, model: Module, has_loss: bool) -> None:
    seen: dict[str, str] = {}

    def claim(name: str, what: str, loc: Loc) -> None:
        if name in seen:
            raise ProblemError(loc, f"'{name}' names both {seen[name]} and {what}; two things with one name are an error")
        seen[name] = what

    reserved = (ROOT, "loss") + ((OUTPUT,) if has_loss else ())
    for kind, decls in (("input", inputs), ("target", targets)):
        for d in decls:
            if d.name in reserved:
                raise ProblemError(d.loc, f"'{d.name}' is reserved ({ROOT}: the root module's output, loss: the loss"
                                          + (f", {OUTPUT}: the model output the loss refers to" if has_loss else "")
                                          + f"); rename the {kind}")
            claim(d.name, f"{kind} '{d.name}'", d.loc)
    for m in model.walk():
        for p in m.params:
            claim(p.name, f"parameter '{p.name}'", p.loc)
        for b in m.buffers:
            claim(b.name, f"buffer '{b.name}'", b.loc)
        if m.path:
            claim(m.path, f"module '{m.path}'", m.loc)


def _gradient_literals_name_no_tensor(inputs, targets, variants) -> None:
    """A ``grad_output`` / ``grad_outputs`` entry is a value written out: a name in it is a free
    symbol. One that is also an input's or a target's name is surely meant as that tensor, which a
    literal cannot be: refused, with the way to say it (a root that multiplies by it)."""
    if variants is FAILED:
        return
    names = {d.name for group in (inputs, targets) if group is not FAILED for d in group}
    literals = []
    for v in variants:
        for bw in [v.backward] + [s.backward for s in v.steps or () if s.backward is not None]:
            literals.append(bw.grad_output)
            literals.extend(getattr(bw.second, "grad_outputs", ()) or ())
    for lit in literals:
        if lit is None:
            continue
        named = next((i.name for i in lit.items if isinstance(i, Sym) and i.name in names), None)
        if named is not None:
            raise ProblemError(lit.loc, f"'{named}' in a grad_output is a free symbol, not the tensor {named}: a "
                                        "grad_output is a value written out; to weight a root by a tensor, write "
                                        f"the product as the root (roots: [\"(gw * {named}).sum()\"])")


def _range_checks(dtype: str, inputs, targets, model, variants, symbols, snode: YNode | None) -> None:
    """Literals the dtype holds only as denormals (or 0), and such symbol values, are refused."""
    decls: list[TensorDecl] = []
    for group in (inputs, targets):
        if group is not FAILED:
            decls.extend(group)
    if model is not FAILED:
        for m in model.walk():
            decls.extend(m.params)
            decls.extend(m.buffers)
    grad_outputs = []
    if variants is not FAILED:
        for v in variants:
            decls.extend(d for d in v.inputs if d not in decls)
            if v.backward.grad_output is not None:
                grad_outputs.append(v.backward.grad_output)
            for s in v.steps or ():
                decls.extend(s.inputs)
                if s.backward is not None and s.backward.grad_output is not None:
                    grad_outputs.append(s.backward.grad_output)
    errors = []
    seen: set[int] = set()
    for d in decls + [TensorDecl("backward.grad_output", g, False, g.loc) for g in grad_outputs]:
        if id(d.value) in seen:
            continue
        seen.add(id(d.value))
        try:
            check_range(d, dtype)
        except ProblemError as err:
            errors.append(err)
    if symbols is not FAILED and isinstance(snode, YMap):
        for key, value in snode.entries:
            if key.text in symbols:
                try:
                    check_symbol_value(key.text, symbols[key.text], dtype, value.loc)
                except ProblemError as err:
                    errors.append(err)
    raise_all(errors)



def load(path: str) -> Problem:
    """Read and validate the problem file at ``path`` (``adjoint.load`` is this, with the
    conveniences of :class:`adjoint.api.Problem`)."""
    from adjoint.format.loader import read_yaml
    return build_problem(read_yaml(path), path)


def loads(text: str, name: str = "<string>") -> Problem:
    """Like :func:`load`, from YAML text."""
    from adjoint.format.loader import parse_yaml_text
    return build_problem(parse_yaml_text(text, name), name)
