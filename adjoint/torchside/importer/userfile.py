"""``FILE.py:FACTORY``: the user's file loaded as a module and its factory called.

This runs the user's own code, as ``python FILE.py`` would (the user asked for it by naming
the file); problem files, by contrast, are never executed. Every way it can go wrong is one
line: no such file, no such function, the factory raising (with the line of the user's code
where it raised), a factory that does not return an ``nn.Module``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys

from torch import nn

from adjoint.format.errors import ProblemError
from adjoint.torchside.importer.where import of_exception, show_path


def split_spec(spec: str) -> tuple[str, str]:
    path, sep, factory = spec.rpartition(":")
    if not sep or not path or not factory.isidentifier():
        raise ProblemError(None, f"{spec}: give the model as FILE.py:FACTORY (a function of the file that returns "
                                 "the nn.Module), e.g. examples/mlp.py:make_model")
    return path, factory


def load_factory(path: str, factory: str):
    if not os.path.isfile(path):
        raise ProblemError(None, f"{path}: no such file; give the Python file that defines {factory}()")
    name = "adjoint_user_" + "".join(c if c.isalnum() else "_" for c in os.path.abspath(path))
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ProblemError(None, f"{path}: not a Python file Python can import; give a .py file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module          # dataclasses and pickling look their module up by name
    here = os.path.abspath(path)
    try:
        with beside(here):
            spec.loader.exec_module(module)
    except KeyboardInterrupt:
        raise
    except SyntaxError as exc:
        raise ProblemError(None, f"{show_path(exc.filename or path)}:{exc.lineno}:{exc.offset}: {exc.msg}; "
                                 "the file must be valid Python") from None
    except BaseException as exc:       # SystemExit too: sys.exit() in the file is not the tool's exit
        where = of_exception(exc, {here}) or show_path(path)
        raise ProblemError(None, f"{where}: importing the file raised {type(exc).__name__}: {_one(exc)}; "
                                 "fix the file so that python can import it") from None
    fn = getattr(module, factory, None)
    if not callable(fn):
        found = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_")
                       and getattr(v, "__module__", None) == name)
        raise ProblemError(None, f"{show_path(path)}: has no function '{factory}'; its functions and classes: "
                                 f"{', '.join(found) or 'none'}")
    return fn, here


@contextlib.contextmanager
def beside(here: str):
    """The file's own directory first on ``sys.path`` while it is imported and its factory runs, as
    ``python FILE.py`` puts it: ``from layers import Block`` finds the model's sibling file."""
    folder = os.path.dirname(here)
    sys.path.insert(0, folder)
    try:
        yield
    finally:
        try:
            sys.path.remove(folder)   # the first one: the one put there
        except ValueError:
            pass


def call_factory(path: str, factory: str) -> nn.Module:
    fn, here = load_factory(path, factory)
    try:
        with beside(here):
            model = fn()
    except KeyboardInterrupt:
        raise
    except BaseException as exc:       # SystemExit too: the factory's sys.exit() is not the tool's exit
        where = of_exception(exc, {here}) or show_path(path)
        raise ProblemError(None, f"{where}: {factory}() raised {type(exc).__name__}: {_one(exc)}; "
                                 "the factory must build the model without arguments") from None
    if not isinstance(model, nn.Module):
        raise ProblemError(None, f"{show_path(path)}: {factory}() returned {type(model).__name__}, not an "
                                 "nn.Module; return the model")
    return model


def _one(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:200] or "(no message)"


def factory_location(path: str, factory: str) -> str | None:
    """``file:line`` of the factory's ``def`` (where a refusal about the model as a whole points)."""
    import inspect
    name = "adjoint_user_" + "".join(c if c.isalnum() else "_" for c in os.path.abspath(path))
    fn = getattr(sys.modules.get(name), factory, None)
    try:
        _, line = inspect.getsourcelines(fn)
    except (OSError, TypeError):
        return None
    return f"{show_path(path)}:{line}"
