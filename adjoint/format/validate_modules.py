"""The module tree of a problem file -> :class:`adjoint.format.problem.Module` records (contract v1 and v2).

A module is built-in (``type:`` a ``torch.nn`` class of :mod:`adjoint.format.module_signatures`, with
``args``, ``params``, ``buffers``), a container (``Sequential``, ``ModuleList``) or custom
(``forward``, own ``params``/``buffers``/``children``, optionally a ``function``). Every
module takes ``training`` (inherited) and ``requires_grad: false`` (freezes it and its
children). Built-in parameters the file leaves out are filled by the ``init`` generator
(:mod:`adjoint.format.init_draw`) when the file has ``init: {seed: N}``; buffers start at PyTorch's
defaults. Children are validated independently: a mistake in one does not hide another's.
"""

from __future__ import annotations

import re
from dataclasses import replace
from fractions import Fraction

from adjoint.format import init_draw as generator
from adjoint.format import module_signatures as nn_types
from adjoint.format import torch_names
from adjoint.format import spectral_norm as sn
from adjoint.format import weight_norm as wn
from adjoint.format.checks import FAILED, Issues, boolean, identifier, mapping, string, suggest, unknown_keys
from adjoint.format.errors import Loc, ProblemError, raise_all
from adjoint.format.expr import parse_expression, parse_program
from adjoint.format.expr import parse_statements
from adjoint.format.literals import IDENT_RE, NotANumber, NumberRefused, parse_int, parse_literal, read_number, show_text
from adjoint.format.loader import YMap, YNode, YScalar, YSeq, kind_name
from adjoint.format.module_signatures import NNType
from adjoint.format.complex_literals import complex_decl, is_complex_node
from adjoint.format.problem import HOLDERS, ROOT, Function, Literal, Module, TensorDecl
from adjoint.format.syntax import Assert
from adjoint.format.syntax import (Assign, AugAssign, Attr, ExprStmt, Method, Name, Return, Subscript, With,
                                  children as sub_expressions, to_source)
from adjoint.format.tying import is_tied, tied_decl
from adjoint.format.validate_args import constructor_error, read_args, show_args
from adjoint.format.validate_tensors import tensor_decl, tensor_table
from adjoint.format.init_items import generated as generated_items
from adjoint.format.sidefiles import FileItems

MODULE_KEYS = ("type", "args", "params", "buffers", "children", "inputs", "forward", "function", "bias", "training",
               "requires_grad", "mask", "uses", "plain", "weight_norm", "spectral_norm")
_COMMON = ("training", "requires_grad")
_CHILD_KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]+")


def type_list() -> str:
    return ", ".join(nn_types.TYPES)


class ModuleBuilder:
    """Builds the module tree; records every independent mistake in ``issues``.

    ``complete`` stays True only if every module was built: checks that compare other keys
    with the tree (hook targets) are skipped otherwise, so a broken module is one line (and a
    module whose constructor raises, the answer, leaves them unchecked: PyTorch stops first)."""

    def __init__(self, issues: Issues, init_seed: int | None, init_given: bool):
        self.issues = issues
        self.init_seed = init_seed
        self.init_given = init_given
        self.complete = True

    def attempt(self, fn, *args):
        result = self.issues.attempt(fn, *args)
        if result is FAILED:
            self.complete = False
        return result

    def table(self, node: YNode, what: str, make) -> list[TensorDecl] | object:
        """A ``NAME: tensor`` table, each entry on its own; FAILED if any entry failed."""
        before = len(self.issues.errors)
        out = tensor_table(node, what, make, self.issues)
        return FAILED if len(self.issues.errors) > before else out

    # ------------------------------------------------------------------ one module
    def module(self, node: YNode, path: str, name: str, training: bool, frozen: bool) -> Module:
        what = f"module '{path or ROOT}'"
        if not isinstance(node, YMap):
            raise ProblemError(node.loc, f"{what} must be a mapping, not {kind_name(node)}")
        raise_all(unknown_keys(node, what, MODULE_KEYS))
        m = node
        mtype = self.module_type(m, what)
        t = nn_types.lookup(mtype) if mtype is not None else None
        if m.get("training") is not None:
            training = boolean(m.get("training"), f"training of {what}")
        if m.get("requires_grad") is not None:
            rg = boolean(m.get("requires_grad"), f"requires_grad of {what}")
            if rg and frozen:
                raise ProblemError(m.get("requires_grad").loc, f"{what} is inside a module with requires_grad: false, "
                                                               "which freezes its children too; drop requires_grad: true")
            frozen = frozen or not rg
        prefix = f"{path}." if path else ""
        if t is None:
            return self.custom(m, path, name, what, prefix, training, frozen)
        if t.container:
            return self.container(m, t, path, name, what, training, frozen)
        from adjoint.format.composite import is_composite
        if is_composite(t.name):   # TransformerEncoderLayer: built-in submodules (adjoint.format.validate_composite)
            from adjoint.format.validate_composite import composite
            return composite(self, m, t, path, name, what, prefix, training, frozen, builtin_inputs)
        return self.builtin(m, t, path, name, what, prefix, training, frozen)

    def module_type(self, m: YMap, what: str) -> str | None:
        if m.get("type") is None:
            return None
        mtype = string(m.get("type"), f"the type of {what}")
        if nn_types.lookup(mtype) is not None:
            return mtype
        loc = m.get("type").loc
        if torch_names.is_nn_module(mtype):
            raise ProblemError(loc, f"'{mtype}' is a torch.nn module adjoint does not model yet (built-in types: "
                                    f"{type_list()}); write it as a custom module with a forward")
        raise ProblemError(loc, f"unknown module type '{mtype}'{suggest(mtype, nn_types.TYPES)} (built-in types: "
                                f"{type_list()}; leave type out for a custom module with a forward)")

    def allowed_only(self, m: YMap, mtype: str, keys: tuple[str, ...]) -> None:
        errors = [ProblemError(key.loc, f"a {mtype} module takes no '{key.text}'; it takes: {', '.join(keys)}")
                  for key, _ in m.entries if key.text not in ("type",) + keys]
        raise_all(errors)

    # ------------------------------------------------------------------ custom
    def custom(self, m: YMap, path: str, name: str, what: str, prefix: str, training: bool, frozen: bool) -> Module:
        if m.get("bias") is not None:
            raise ProblemError(m.key_loc("bias"), f"'bias' is a Linear option; {what} is a custom module")
        for key, types in (("weight_norm", wn.TYPES), ("spectral_norm", sn.TYPES)):
            if m.get(key) is not None:
                raise ProblemError(m.key_loc(key), f"'{key}' is an option of {', '.join(types)}; {what} is a custom "
                                                   "module (give type: to use a built-in)")
        for key in ("args", "mask"):
            if m.get(key) is not None:
                raise ProblemError(m.key_loc(key), f"'{key}' belongs to built-in types; {what} is a custom module "
                                                   "(give type: to use a built-in)")
        if m.get("forward") is None:
            raise ProblemError(m.loc, f"{what} has neither a type nor a forward; give type: Linear (or another "
                                      "built-in) or forward: \"expression\"")
        inputs, defaults = ("x",), ()
        if m.get("inputs") is not None:
            # a child may take no argument (a learned embedding or prompt called as emb()); the root is
            # called with the problem's inputs
            got = self.attempt(input_names, m.get("inputs"), what, True, bool(path))
            inputs, defaults = (FAILED, ()) if got is FAILED else got
        params: list[TensorDecl] | object = []
        if m.get("params") is not None:
            params = self.attempt(self.table, m.get("params"), f"the params of {what}",
                                  lambda n, v, loc: self.param_decl(prefix + n, v, loc, frozen))
        buffers: list[TensorDecl] | object = []
        if m.get("buffers") is not None:
            buffers = self.attempt(self.table, m.get("buffers"), f"the buffers of {what}",
                                   lambda n, v, loc: tensor_decl(prefix + n, v, loc, f"buffer '{prefix + n}'", False,
                                                                 ("scale", "dtype", "version")))
        kids: tuple[Module, ...] | object = ()
        if m.get("children") is not None:
            kids = self.attempt(self.children, m.get("children"), path, what, "custom", training, frozen)
        forward = self.attempt(parse_program, m.get("forward"), f"the forward of {what}",
                               module_dicts(kids) if kids is not FAILED else frozenset())
        if forward is not FAILED and kids is not FAILED and kids:
            self.attempt(check_child_access, forward, kids, what)
        function = None
        if m.get("function") is not None:
            if kids:
                raise ProblemError(m.key_loc("function"), f"{what} declares a custom Function and has children; "
                                                          "a Function's forward cannot call modules")
            if inputs is not FAILED and params is not FAILED:
                function = self.attempt(parse_function, m.get("function"), path, inputs, params, what)
        if any(x is FAILED for x in (inputs, params, buffers, kids, forward, function)):
            return FAILED
        check_unique_names(m, what, inputs, params, buffers, kids)
        uses: tuple = ()
        if m.get("uses") is not None:   # names read from the caller, as a closure reads them
            uses, _ = input_names(m.get("uses"), f"the uses of {what}", False)
            for n in uses:
                if n in inputs or any(p.name.rsplit(".", 1)[-1] == n for p in params):
                    raise ProblemError(m.get("uses").loc, f"'{n}' is both in uses and an input or parameter of "
                                                          f"{what}; a name comes from one place")
        plain = plain_function(m, path, what)
        return Module(path, name or ROOT, None, tuple(params), tuple(kids), tuple(inputs), forward, function, m.loc,
                      buffers=tuple(buffers), training=training, input_defaults=defaults, uses=tuple(uses),
                      plain=plain)

    # ------------------------------------------------------------------ containers
    def container(self, m: YMap, t: NNType, path: str, name: str, what: str, training: bool, frozen: bool) -> Module:
        is_list = t.name == "ModuleList"
        holder = t.name in HOLDERS   # ModuleList, ModuleDict: no forward, items called by their parent
        self.allowed_only(m, t.name, ("children",) + (() if holder else ("inputs",)) + _COMMON)
        if holder and not path:
            call = "layers[0](x)" if is_list else "blocks.first(x)"
            raise ProblemError(m.loc, f"the root module cannot be a {t.name}: a {t.name} has no forward; give the "
                                      f"root a forward that calls {call}, ...")
        empty = t.name == "Sequential" and m.get("children") is None   # nn.Sequential(): hands back its input
        if m.get("children") is None and not empty:
            raise ProblemError(m.loc, f"{what} is a {t.name} without children; give children: "
                                      + ("[MODULE, ...]" if is_list else "{NAME: MODULE, ...}"))
        if t.name == "ModuleDict" and not isinstance(m.get("children"), YMap):
            raise ProblemError(m.get("children").loc, f"the children of {what} (a ModuleDict) must be a mapping "
                                                      "NAME: MODULE")
        inputs = ("input",) if not holder else ()
        if m.get("inputs") is not None:
            inputs, _ = input_names(m.get("inputs"), what, False)
            if len(inputs) != 1:
                raise ProblemError(m.get("inputs").loc, f"a {t.name} module takes exactly one input")
        kids = () if empty else self.children(m.get("children"), path, what, t.name, training, frozen)
        if kids is FAILED:
            return FAILED
        return Module(path, name or ROOT, t.name, (), kids, inputs, None, None, m.loc, training=training,
                      is_list=is_list)

    def children(self, node: YNode, path: str, what: str, kind: str, training: bool, frozen: bool):
        """``NAME: MODULE`` (custom, Sequential), or a list / ``0:, 1:, ...`` (ModuleList, Sequential)."""
        if isinstance(node, YSeq) and kind != "custom":
            entries = [(str(i), item, item.loc) for i, item in enumerate(node.items)]
        elif isinstance(node, YMap):
            entries = [(key.text, value, key.loc) for key, value in node.entries]
            if kind == "ModuleList":
                for i, (key, _, loc) in enumerate(entries):
                    if key != str(i):
                        raise ProblemError(loc, f"the children of a ModuleList are named 0, 1, ... in order; this "
                                                f"one should be {i}, not '{key}' (or give them as a YAML list)")
        else:
            form = "a mapping NAME: MODULE" + (" or a list" if kind != "custom" else "")
            raise ProblemError(node.loc, f"the children of {what} must be {form}, not {kind_name(node)}")
        if not entries and kind == "Sequential":
            return ()   # nn.Sequential(): its forward hands back its input as it is
        if not entries:
            raise ProblemError(node.loc, f"the children of {what} are empty")
        out = []
        failed = False
        for key, value, loc in entries:
            why = _child_name_problem(key, kind != "custom")
            if why is None and key == ROOT and not path:
                why = f"'{ROOT}' names the root module; pick another child name"
            if why is not None:
                self.issues.add(ProblemError(loc, why))
                self.complete = False
                failed = True
                continue
            child = self.attempt(self.module, value, f"{path}.{key}" if path else key, key, training, frozen)
            if child is FAILED:
                failed = True
            else:
                out.append(child)
        return FAILED if failed else tuple(out)

    # ------------------------------------------------------------------ built-in layers and losses
    def builtin(self, m: YMap, t: NNType, path: str, name: str, what: str, prefix: str, training: bool,
                frozen: bool) -> Module:
        keys = ["args", "inputs"]
        if t.has_params:
            keys.append("params")
        if t.has_buffers:
            keys.append("buffers")
        if t.name == "Linear":
            keys.append("bias")
        if t.name in nn_types.DROPOUTS:
            keys.append("mask")
        if t.name in wn.TYPES:
            keys.append("weight_norm")
        if t.name in sn.TYPES:
            keys.append("spectral_norm")
            if not t.has_buffers:   # its power iteration's _u and _v
                keys.append("buffers")
        self.allowed_only(m, t.name, tuple(keys) + _COMMON)
        inputs = t.inputs
        if m.get("inputs") is not None:
            inputs = self.attempt(builtin_inputs, m.get("inputs"), t, what)
        setup_error = None   # what the constructor raises (the answer), if it refuses the args
        given = None   # the args the file wrote (None: every one, as the v1 Linear's, read off its params)
        normed = None   # torch.nn.utils.parametrizations.weight_norm's dim (adjoint.format.weight_norm)
        legacy = False   # ... or the older torch.nn.utils.weight_norm's (weight_norm: {legacy: true})
        spectral, extra_buffers = None, ()   # parametrizations.spectral_norm's (adjoint.format.spectral_norm)
        sn.check_keys(m, t, what, v1=t.name == "Linear" and m.get("args") is None)
        if t.name == "Linear" and m.get("args") is None:
            if m.get("weight_norm") is not None:
                raise ProblemError(m.key_loc("weight_norm"), f"{what} has weight_norm: give its args: (in_features, "
                                                             "out_features) and its params under their parametrized "
                                                             f"names ({wn.G}, {wn.V})")
            args, params = linear_v1(m, path, what, frozen, self.param_decl)
        else:
            if m.get("bias") is not None:
                raise ProblemError(m.key_loc("bias"), f"{what} gives args:, so give its bias there too, as in args: "
                                                      "{in_features: 2, out_features: 1, bias: false}")
            args = read_args(m.get("args"), t, what, m.loc)
            given = tuple(key.text for key, _ in m.get("args").entries) if m.get("args") is not None else ()
            setup_error = constructor_error(t, args)
            specs = None
            if m.get("weight_norm") is not None and setup_error is None:
                weight = next(s.shape for s in t.params(args) if s.name == "weight")
                normed = wn.read_weight_norm(m.get("weight_norm"), t.name, weight, what)
                legacy = wn.is_legacy(m.get("weight_norm"), what)
                setup_error = wn.dim_error(normed, weight)   # weight_norm(module, dim=D) raises: the answer
                specs = wn.normed_specs(t.params(args), normed, legacy)   # (a refused one: named, any shape)
            if m.get("spectral_norm") is not None and setup_error is None:
                spectral, setup_error, specs, extra_buffers = sn.read_module(m.get("spectral_norm"), t, args, what)
            params = self.builtin_params(m, t, args, prefix, what, frozen, setup_error is not None, specs)
        if setup_error is not None:   # never built: what names its inside is not checked (PyTorch stops first)
            self.complete = False
            if m.get("spectral_norm") is not None and not extra_buffers:   # _u, _v given: taken at any shape
                extra_buffers = sn.buffer_specs((), None)
        buffers = self.builtin_buffers(m, t, args, prefix, what, extra_buffers)
        mask = None
        if t.name in nn_types.DROPOUTS and setup_error is None:
            mask = dropout_mask(m, args, training, what, t.name)
        if t.name in ("AlphaDropout", "FeatureAlphaDropout") and training and 0 < args["p"] < 1 \
                and setup_error is None:
            raise ProblemError(m.loc, f"{what} is {'an' if t.name[0] == 'A' else 'a'} {t.name} in training mode, whose noise (SELU's affine one, drawn "
                                      "at random) is not modelled yet; give training: false, or p: 0")
        if t.name == "MultiheadAttention" and training and args["dropout"] != 0 and setup_error is None:
            raise ProblemError(m.loc, f"{what} drops attention weights at random in training mode, which no "
                                      "prediction can know; give args: {dropout: 0} or training: false")
        if inputs is FAILED:
            return FAILED
        return Module(path, name or ROOT, t.name, params, (), tuple(inputs), None, None, m.loc,
                      args=tuple(args.items()), buffers=buffers, training=training, mask=mask, setup_error=setup_error,
                      given=given, weight_norm=normed, spectral_norm=spectral, weight_norm_legacy=legacy)

    def builtin_params(self, m: YMap, t: NNType, args: dict, prefix: str, what: str,
                       frozen: bool, refused: bool = False, specs=None) -> tuple[TensorDecl, ...]:
        """``refused``: the constructor raises (the answer), so no value is ever made: the given
        ones are taken at any shape, the others are placeholders (zeros) that name the parameters.
        ``specs``: the parameters when not the type's own (a normalised weight's g and v)."""
        normed = specs is not None
        specs = t.params(args) if specs is None else specs
        given: dict[str, TensorDecl] = {}
        pnode = m.get("params")
        if pnode is not None:
            if not isinstance(pnode, YMap):
                raise ProblemError(pnode.loc, f"the params of {what} must be a mapping NAME: tensor, not "
                                              f"{kind_name(pnode)}")
            names = [s.name for s in specs]
            errors = []
            for key, value in pnode.entries:
                if key.text not in names:
                    listed = ", ".join(names) or "none"
                    errors.append(ProblemError(key.loc, f"'{key.text}' is not a parameter of this {t.name}"
                                                        f"{suggest(key.text, names)} (its parameters: {listed})"))
                    continue
                spec = next(s for s in specs if s.name == key.text)
                try:
                    decl = tied_decl(prefix + key.text, value, key.loc, spec.shape, frozen) if is_tied(value) \
                        else self.param_decl(prefix + key.text, value, key.loc, frozen)
                except ProblemError as err:
                    errors.append(err)
                    continue
                if decl.value.shape != spec.shape and not refused:
                    errors.append(ProblemError(decl.value.loc, f"parameter '{decl.name}' has shape "
                                                               f"{list(decl.value.shape)} but this {t.name} "
                                                               f"({show_args(t, args)}) has {list(spec.shape)}"))
                    continue
                given[key.text] = decl
            raise_all(errors)
        missing = [s for s in specs if s.name not in given]
        if normed and any(s.name == sn.ORIGINAL for s in missing):
            raise ProblemError(m.loc, f"{what} ({t.name}) has spectral_norm: give {sn.ORIGINAL} (the weight) under "
                                      "params: (init: does not draw it)")
        if normed and any(s.name in (wn.G, wn.V, wn.LEGACY_G, wn.LEGACY_V) for s in missing):
            g, v = wn.names(any(s.name == wn.LEGACY_V for s in specs))
            raise ProblemError(m.loc, f"{what} ({t.name}) has weight_norm: give {g} (g) and {v} (v) under "
                                      "params: (init: does not draw them: PyTorch's g is the 2-norms of the drawn weight)")
        drawn = self.init_seed is not None or self.init_given
        if not drawn and any(s.default is None for s in missing) and not refused:
            names = ", ".join(s.name for s in missing if s.default is None)
            raise ProblemError(m.loc, f"{what} ({t.name}) has no values for {names}; give them under params: or add "
                                      "a top-level init: {seed: 0} to generate them")
        out = []
        for s in specs:
            if s.name in given:
                out.append(given[s.name])
            elif refused:
                out.append(self.constant(prefix + s.name, s.shape, "zeros", m.loc, not frozen))
            elif drawn:
                out.append(self.generated(prefix + s.name, s.shape, m.loc, t, args, frozen))
            else:   # PyTorch's own value, the same whatever the random state (a norm's ones and zeros)
                out.append(self.constant(prefix + s.name, s.shape, s.default, m.loc, not frozen, version=s.version))
        return tuple(out)

    @staticmethod
    def constant(full: str, shape: tuple[int, ...], default: str, loc: Loc, requires_grad: bool,
                 dtype: str | None = None, version: int = 0) -> TensorDecl:
        """A parameter or buffer PyTorch makes the same whatever the random state: ``ones``, ``zeros``
        or a constant (PReLU's ``init``),
        at the version its constructor leaves (``ParamSpec.version``; 0 for a stand-in)."""
        count = 1
        for n in shape:
            count *= n
        value = Fraction(1) if default == "ones" else Fraction(0) if default == "zeros" else Fraction(default)
        return TensorDecl(full, Literal(shape, (value,) * count, loc), requires_grad, loc, dtype, version=version,
                          default=True)

    def generated(self, full: str, shape: tuple[int, ...], loc: Loc, t: NNType, args: dict,
                  frozen: bool) -> TensorDecl:
        fan = generator.param_fan_in(t.name, full.rsplit(".", 1)[-1], {s.name: s.shape for s in t.params(args)})
        items = generated_items(loc, self.init_seed or 0, full, shape, f"parameter '{full}'", fan)
        if t.name in ("Embedding", "EmbeddingBag") and args["padding_idx"] is not None:  # torch zeroes that row at construction
            width = shape[1]
            row = args["padding_idx"]
            num = items.num.copy()
            num[row * width:(row + 1) * width] = 0
            items = FileItems(num, items.den, items.source)
        return TensorDecl(full, Literal(shape, items, loc), not frozen, loc)

    def builtin_buffers(self, m: YMap, t: NNType, args: dict, prefix: str, what: str,
                        extra=()) -> tuple[TensorDecl, ...]:
        """``extra``: buffers a parametrization adds (spectral_norm's _u, _v), which the file must give."""
        specs = tuple(t.buffers(args)) + tuple(extra)
        given: dict[str, TensorDecl] = {}
        bnode = m.get("buffers")
        if bnode is not None:
            if not isinstance(bnode, YMap):
                raise ProblemError(bnode.loc, f"the buffers of {what} must be a mapping NAME: tensor, not "
                                              f"{kind_name(bnode)}")
            names = [s.name for s in specs]
            for key, value in bnode.entries:
                if key.text not in names:
                    listed = ", ".join(names) or "none"
                    raise ProblemError(key.loc, f"'{key.text}' is not a buffer of this {t.name}"
                                                f"{suggest(key.text, names)} (its buffers: {listed})")
                spec = next(s for s in specs if s.name == key.text)
                keys = ("scale", "version") + (("dtype",) if spec.dtype else ())
                decl = tensor_decl(prefix + key.text, value, key.loc, f"buffer '{prefix + key.text}'", False, keys,
                                   spec.dtype)
                if spec.shape is not None and decl.value.shape != spec.shape:
                    raise ProblemError(decl.value.loc, f"buffer '{decl.name}' has shape {list(decl.value.shape)} but "
                                                       f"this {t.name} ({show_args(t, args)}) has {list(spec.shape)}")
                given[key.text] = decl
        sn.check_buffers_given(m, t.name, extra, given, what)
        out = []
        for s in specs:
            if s.name in given:
                out.append(given[s.name])
            elif s.default is not None:
                out.append(self.constant(prefix + s.name, s.shape, s.default, m.loc, False, s.dtype, s.version))
        return tuple(out)

    # ------------------------------------------------------------------ parameters
    def param_decl(self, full: str, node: YNode, loc: Loc, frozen: bool) -> TensorDecl:
        if is_tied(node):   # a custom module's tied parameter: any shape (the named one's)
            return tied_decl(full, node, loc, None, frozen)
        decl = complex_decl(full, node, loc, f"parameter '{full}'", True) if is_complex_node(node) else \
            tensor_decl(full, node, loc, f"parameter '{full}'", True, ("requires_grad", "scale", "version"))
        if frozen and decl.requires_grad:
            if isinstance(node, YMap) and node.get("requires_grad") is not None:
                raise ProblemError(node.get("requires_grad").loc, f"parameter '{full}' is in a module with "
                                                                  "requires_grad: false, which freezes it; drop "
                                                                  "requires_grad: true")
            decl = replace(decl, requires_grad=False)  # a complex one keeps its dtype
        return decl


# ----------------------------------------------------------------------------- pieces

def _child_name_problem(key: str, numbered: bool) -> str | None:
    """A child's name is an identifier; children of Sequential and ModuleList may be numbers too."""
    if identifier_ok(key) or (numbered and _CHILD_KEY_RE.fullmatch(key)):
        return None
    return f"{show_text(key)} is not a valid module name; use letters, digits and _"


def identifier_ok(text: str) -> bool:
    return IDENT_RE.fullmatch(text) is not None


def input_names(node: YNode, what: str, defaults_allowed: bool,
                empty_allowed: bool = False) -> tuple[tuple[str, ...], tuple]:
    """``[x, u]`` or ``[x, {scale: 1}]``: names and ``(name, default)`` pairs, Python's rules;
    ``[]`` (a forward without arguments) where ``empty_allowed``."""
    if isinstance(node, YScalar) and node.kind == "str":
        items = [node]
    elif isinstance(node, YSeq):
        items = list(node.items)
    else:
        raise ProblemError(node.loc, f"the inputs of {what} must be a list of argument names, e.g. [x, u]")
    names: list[str] = []
    defaults: list[tuple[str, object]] = []
    for item in items:
        if isinstance(item, YMap) and len(item.entries) == 1 and defaults_allowed:
            key, value = item.entries[0]
            n = identifier(key, "argument name")
            defaults.append((n, default_value(value, f"the default of '{n}'")))
        elif isinstance(item, YMap):
            raise ProblemError(item.loc, "an input with a default is one NAME: VALUE mapping, as in {scale: 1}"
                               if defaults_allowed else f"the inputs of {what} take no defaults")
        else:
            n = identifier(_scalar(item, f"an input name of {what}"), "argument name")
            if defaults:
                raise ProblemError(item.loc, f"input '{n}' has no default but follows one that has: Python raises "
                                             "'parameter without a default follows parameter with a default'")
        if n in names:
            raise ProblemError(item.loc, f"argument '{n}' is listed twice in the inputs of {what}")
        names.append(n)
    if not names and not empty_allowed:
        raise ProblemError(node.loc, f"{what} needs at least one input")
    return tuple(names), tuple(defaults)


def _scalar(node: YNode, what: str) -> YScalar:
    string(node, what)
    assert isinstance(node, YScalar)
    return node


def default_value(node: YNode, what: str):
    """A default: a number (int stays int), a bool, None or a string."""
    if isinstance(node, YScalar):
        if node.kind == "null":
            return None
        if node.kind == "bool":
            return boolean(node, what)
        if node.kind == "int":
            return parse_int(node, what)
        try:
            return read_number(node.text)
        except NumberRefused as exc:
            raise ProblemError(node.loc, f"{what}: {exc}") from None
        except NotANumber:
            if node.kind == "str":
                return node.text
    raise ProblemError(node.loc, f"{what} must be a number, true/false, null or a string, not {kind_name(node)}")


def builtin_inputs(node: YNode, t: NNType, what: str) -> tuple[str, ...]:
    names, _ = input_names(node, what, False)
    low, high = len(t.inputs), len(t.inputs) + len(t.optional_inputs)
    if not low <= len(names) <= high:
        if low == high == 1:
            raise ProblemError(node.loc, f"a {t.name} module takes exactly one input")
        count = f"{low}" if low == high else f"{low} to {high}"
        raise ProblemError(node.loc, f"a {t.name} module takes {count} inputs "
                                     f"({', '.join(t.inputs + t.optional_inputs)})")
    return names


def linear_v1(m: YMap, path: str, what: str, frozen: bool, param_decl) -> tuple[dict, tuple[TensorDecl, ...]]:
    """v1's Linear: no args, the shape read from params (``bias: false`` in params or on the module)."""
    prefix = f"{path}." if path else ""
    pnode = m.get("params")
    if pnode is None:
        raise ProblemError(m.loc, f"{what} is a Linear without params; give params: {{weight: [[...]], bias: [...]}}, "
                                  "or args: {in_features: N, out_features: M} and a top-level init: {seed: 0}")
    mapping(pnode, f"the params of {what}", ("weight",), ("bias",))
    if is_tied(pnode.get("weight")):   # its shape is the named parameter's, known once the tree is read
        raise ProblemError(pnode.get("weight").loc, f"{what} ties its weight, so its sizes come from args: give "
                                                    "args: {in_features: N, out_features: M, bias: ...} beside "
                                                    "params: {weight: {tied: ...}}")
    weight = param_decl(prefix + "weight", pnode.get("weight"), pnode.key_loc("weight"), frozen)
    if len(weight.value.shape) != 2:
        raise ProblemError(weight.value.loc, f"Linear weight must be 2-D (out_features, in_features), "
                                             f"got shape {list(weight.value.shape)}")
    out_f, in_f = weight.value.shape
    args = {"in_features": in_f, "out_features": out_f, "bias": True}
    bias_node = pnode.get("bias")
    if bias_node is None:
        bias_node = m.get("bias")
    if bias_node is None:
        raise ProblemError(pnode.loc, f"{what}: give bias: [...] (shape [{out_f}]) or bias: false")
    if isinstance(bias_node, YScalar) and bias_node.kind == "bool":
        if boolean(bias_node, "bias"):
            raise ProblemError(bias_node.loc, "bias: true needs values; give bias: [...] or bias: false")
        return dict(args, bias=False), (weight,)
    bias = param_decl(prefix + "bias", bias_node, pnode.key_loc("bias") if pnode.get("bias") else m.key_loc("bias"),
                      frozen)
    if bias.value.shape != (out_f,):
        raise ProblemError(bias.value.loc, f"Linear bias must have shape [{out_f}] "
                                           f"(out_features of weight {list(weight.value.shape)}), "
                                           f"got {list(bias.value.shape)}")
    return args, (weight, bias)


def dropout_mask(m: YMap, args: dict, training: bool, what: str, kind: str = "Dropout") -> Literal | None:
    """Dropout in training mode draws a random keep-mask: the file gives it (0/1 elements; a channel-wise
    ``Dropout2d``'s has one per batch element and channel, checked against the input when it runs)."""
    p = args["p"]
    node = m.get("mask")
    if node is None:
        if training and 0 < p < 1:
            if kind == "Dropout":
                raise ProblemError(m.loc, f"{what} is a Dropout in training mode, which keeps elements at random; give "
                                          "mask: [...] (1 keeps an element, 0 drops it) or training: false")
            raise ProblemError(m.loc, f"{what} is a {kind} in training mode, which keeps channels at random; give mask: "
                                      "[...] (one per batch element and channel, shape (N, C, 1, ...): 1 keeps a "
                                      "channel, 0 drops it) or training: false")
        return None
    if not training:
        raise ProblemError(m.key_loc("mask"), f"{what} is in eval mode, where {kind} passes its input through; "
                                              "drop mask:")
    lit = parse_literal(node, f"the mask of {what}")
    for e in lit.items:
        if not (isinstance(e, Fraction) and e in (0, 1)):
            raise ProblemError(lit.loc, f"the mask of {what} holds {e}; a keep-mask holds 0 (dropped) and 1 (kept)")
    if p == 1 and any(lit.items) or p == 0 and not all(lit.items):
        raise ProblemError(lit.loc, f"with p = {float(p)} {kind} " + ("drops every element" if p == 1 else
                                    "keeps every element") + "; the mask must say so")
    return lit


def parse_function(node: YNode, path: str, inputs: tuple[str, ...], params: list[TensorDecl], what: str) -> Function:
    f = mapping(node, f"the function of {what}", ("backward",), ("name", "save", "dirty", "mark_dirty", "does"))
    if f.get("dirty") is not None and f.get("mark_dirty") is not None:
        raise ProblemError(f.key_loc("mark_dirty"), "give dirty: or mark_dirty: (the same list, ctx.mark_dirty's "
                                                    "arguments), not both")
    dirty = f.get("dirty") if f.get("dirty") is not None else f.get("mark_dirty")
    default = "".join(part[:1].upper() + part[1:] for part in re.split(r"[._]", path or ROOT) if part) + "Function"
    name = string(f.get("name"), "function name") if f.get("name") is not None else default
    if not identifier_ok(name):
        raise ProblemError(f.get("name").loc, f"'{name}' is not a valid class name")
    bw = f.get("backward")
    if not isinstance(bw, YMap):
        raise ProblemError(bw.loc, "function.backward must be a mapping ARG: \"gradient expression\"")
    slots = list(inputs) + [p.name.rsplit(".", 1)[-1] for p in params]
    for key, _ in bw.entries:
        if key.text not in slots:
            raise ProblemError(key.loc, f"'{key.text}' is not an input or parameter of {what}"
                                        f"{suggest(key.text, slots)} (slots: {', '.join(slots)})")
    grads = tuple((s, parse_expression(bw.get(s), f"the backward formula for {s}") if bw.get(s) is not None else None)
                  for s in slots)
    save = None
    if f.get("save") is not None:
        items = f.get("save")
        if not isinstance(items, YSeq):   # save: [] saves nothing (a backward of grad_output alone)
            raise ProblemError(items.loc, "function.save must be a list of expressions (ctx.save_for_backward's "
                                          "arguments), as in save: [x, \"h\"], or [] to save nothing")
        save = tuple(parse_expression(item, f"entry {i} of the save of {what}") for i, item in enumerate(items.items))
    from adjoint.format.validate_dirty import parse_dirty
    does = ()
    if f.get("does") is not None:   # the backward's statements before its formulas (adjoint.engine.function_does)
        if save is None:
            raise ProblemError(f.key_loc("does"), "function.does needs save: (its backward sees saved and "
                                                  "grad_output, as after (x,) = ctx.saved_tensors)")
        does = parse_statements(f.get("does"), f"the does of the function of {what}")
    return Function(name, grads, f.loc, save, parse_dirty(dirty, slots, what), does)


def check_unique_names(m: YMap, what: str, inputs, params, buffers, kids) -> None:
    seen: dict[str, str] = {}
    for kind, names in (("input", inputs), ("parameter", [p.name.rsplit(".", 1)[-1] for p in params]),
                        ("buffer", [b.name.rsplit(".", 1)[-1] for b in buffers]),
                        ("child module", [c.name for c in kids])):
        for n in names:
            if n in seen:
                raise ProblemError(m.loc, f"'{n}' in {what} is both a {seen[n]} and a {kind}; names must be unique")
            seen[n] = kind


def module_dicts(kids: tuple[Module, ...]) -> frozenset:
    """The paths, relative to their parent, of the ModuleDicts among ``kids`` and inside them
    (``transformer``, ``transformer.inner``): a forward calls their items by attribute."""
    out = set()
    stack = [(k, k.name) for k in kids]
    while stack:
        k, rel = stack.pop()
        if k.type == "ModuleDict":
            out.add(rel)
        if k.type in HOLDERS:
            stack.extend((c, f"{rel}.{c.name}") for c in k.children)
    return frozenset(out)


def check_child_access(program, kids: tuple[Module, ...], what: str) -> None:
    """``enc.block(x)`` (or ``enc.weight``) reaches inside a child: not supported; a module calls
    its own children, and a child calls its own."""
    names = {c.name for c in kids}
    from adjoint.format.module_attrs import readable_attribute
    reads = set()   # CHILD.PARAM (lin.weight, transformer.wte.weight) and the module path inside it
    for e in _program_expressions(program):
        if id(e) not in reads and _reads_own_tensor(e, kids):
            while isinstance(e, (Attr, Subscript)):   # the path inside it: tr.h[0] of tr.h[0].weight
                reads.add(id(e))
                e = e.obj if isinstance(e, Attr) else e.value
    for e in _program_expressions(program):
        if id(e) in reads:
            continue   # the child's parameter or buffer itself (F.linear(h, emb.weight), h @ wte.weight.T)
        if isinstance(e, Attr) and isinstance(e.obj, Name) and readable_attribute(kids, e.obj.id, e.name):
            continue   # CHILD.NAME: a tensor the child's forward stored as self.NAME (adjoint.format.module_attrs)
        if isinstance(e, Attr) and isinstance(e.obj, Name) and readable_attribute(kids, e.obj.id, None):
            raise ProblemError(e.loc, f"'{to_source(e)}': the forward of '{e.obj.id}' stores no 'self.{e.name}'; "
                                      f"a caller reads only what its child stores (self.{e.name} = ... in its forward)")
        if isinstance(e, (Method, Attr)) and isinstance(e.obj, Name) and e.obj.id in names:
            raise ProblemError(e.loc, f"'{to_source(e)}' reaches inside the child module '{e.obj.id}', which is not "
                                      f"supported; call a child from its parent's forward (give '{e.obj.id}' a "
                                      "forward that does this, and call it)")


def _reads_own_tensor(e, kids) -> bool:
    """Is ``e`` ``PATH.NAME`` with ``NAME`` a parameter or buffer of the module ``PATH`` names?"""
    from adjoint.format.module_attrs import module_at, own_tensor
    from adjoint.format.syntax import dotted_name, module_path
    if not isinstance(e, Attr):
        return False
    path = module_path(e.obj) or dotted_name(e.obj)
    mod = module_at(kids, path) if path is not None else None
    return mod is not None and own_tensor(mod, e.name)


def _program_expressions(program):
    """Every expression of a program, statements in order (``with`` bodies included), each tree
    walked without recursion."""
    stack = list(reversed(program))
    roots = []
    while stack:
        s = stack.pop()
        if isinstance(s, With):
            stack.extend(reversed(s.body))
        elif isinstance(s, (Assign, AugAssign)):
            roots.extend([s.target, s.value])
        elif isinstance(s, (ExprStmt, Return)):
            roots.append(s.value)
        elif isinstance(s, Assert):
            roots.append(s.test)
    work = list(reversed(roots))
    while work:
        e = work.pop()
        yield e
        work.extend(reversed(sub_expressions(e)))


def plain_function(m: YMap, path: str, what: str) -> bool:
    """``plain: true``: the child is a plain Python function (``lambda x: w * x`` handed to
    ``checkpoint``), not an ``nn.Module``: no module hook, global hook or BackwardHook around
    its calls. Not the root (a problem's model is a module), not a custom Function, and no
    parameters of its own (a function reads its caller's tensors through ``uses:``)."""
    node = m.get("plain")
    if node is None:
        return False
    text = getattr(node, "text", None)
    if text not in ("true", "false", "True", "False"):
        raise ProblemError(node.loc, f"plain: of {what} is true or false")
    plain = text in ("true", "True")
    if plain and m.get("function") is not None:
        raise ProblemError(m.key_loc("plain"), f"{what} is a custom autograd Function; plain: is for a plain Python "
                                               "function")
    if plain and m.get("params") is not None:
        raise ProblemError(m.key_loc("params"), f"{what} is a plain function and has no parameters of its own; read "
                                                "its caller's tensors with uses: [NAME, ...]")
    return plain

