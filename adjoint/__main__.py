"""``python -m adjoint``: the same command line as ``adjoint``."""

from adjoint.cli import main

if __name__ == "__main__":
    main(prog_name="adjoint")
