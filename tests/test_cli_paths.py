"""``solve DIR/`` reads only the files in DIR; ``-o`` never overwrites a side file the problem
reads (issue 28)."""

import os
import shutil

import numpy as np
from click.testing import CliRunner

from adjoint.cli import main

SLINEAR = os.path.join(os.path.dirname(__file__), "..", "problems", "slinear.yaml")


def test_a_link_in_a_directory_to_a_file_outside_is_refused(tmp_path):
    folder = tmp_path / "dir"
    folder.mkdir()
    shutil.copy(SLINEAR, folder / "a.yaml")
    secret = tmp_path / "secret.yaml"
    secret.write_text("name: secret\npassword: [hunter2\n")
    os.symlink(secret, folder / "b.yaml")
    for command in ("solve", "verify"):
        result = CliRunner().invoke(main, [command, str(folder)])
        assert result.exit_code == 2 and result.stdout == "", (command, result.stderr, result.exception)
        assert result.stderr == (f"{folder / 'b.yaml'}: is a symbolic link to {secret}, outside {folder}; a directory "
                                 "is read only for the files in it (name that file itself to read it)\n")
        assert "hunter2" not in result.stderr


def test_a_link_inside_the_directory_is_read(tmp_path):
    folder = tmp_path / "dir"
    (folder / "sub").mkdir(parents=True)
    shutil.copy(SLINEAR, folder / "sub" / "real.yaml")
    os.symlink(folder / "sub" / "real.yaml", folder / "a.yaml")
    result = CliRunner().invoke(main, ["solve", str(folder)])
    assert result.exit_code == 0, result.stderr


def test_output_onto_a_side_file_is_refused(tmp_path):
    np.save(tmp_path / "w.npy", np.array([[0.3]], dtype=np.float32))
    before = (tmp_path / "w.npy").read_bytes()
    text = open(SLINEAR).read().replace("params: {weight: [[0.3]], bias: [0.1]}",
                                        "params: {weight: {value: {file: w.npy}}, bias: [0.1]}")
    assert "file: w.npy" in text
    (tmp_path / "p.yaml").write_text(text)
    for args in (["latex", "-o"], ["latex", "--pdf", "-o"], ["graph", "--format", "dot", "--variant", "full", "-o"]):
        result = CliRunner().invoke(main, [args[0], str(tmp_path / "p.yaml"), *args[1:], str(tmp_path / "w.npy")])
        assert result.exit_code == 2, (args, result.stderr, result.exception)
        assert result.stderr == (f"{tmp_path / 'w.npy'}: is a side file the problem reads; writing there would "
                                 "overwrite it, give another output name with -o\n")
    assert (tmp_path / "w.npy").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.yaml", "w.npy"]
