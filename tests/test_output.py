"""Output files: never the problem file, read-only files respected, symbolic links written
through, modes from the umask, and a full disk or an impossible name leaves the previous file
as it was with one line and exit 2 (a real 64 KB tmpfs where we may mount one)."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import subprocess

import pytest
from click.testing import CliRunner

from adjoint.render import output
from adjoint.cli import main
from adjoint.format.errors import ProblemError
from adjoint.render.output import check_target, write_atomic

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SLINEAR = os.path.join(ROOT, "problems", "slinear.yaml")


def run(*args, input=None):
    result = CliRunner().invoke(main, list(args), input=input)
    return result.exit_code, result.stdout, result.stderr


def one_line(code, err):
    assert code == 2, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    return err.strip()


@contextlib.contextmanager
def umask(mask):
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


# ----------------------------------------------------------------------------- never the input

def test_latex_never_overwrites_its_input(tmp_path):
    problem = tmp_path / "p.yaml"
    problem.write_text(open(SLINEAR).read())
    before = problem.read_bytes()
    code, out, err = run("latex", str(problem), "-o", str(problem))
    assert one_line(code, err) == f"{problem}: is the problem file being read; writing there would overwrite it, " \
                                  "give another output name with -o"
    assert problem.read_bytes() == before


def test_default_output_of_a_tex_named_problem_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)    # the default output is written in the current directory
    problem = tmp_path / "p.tex"   # a problem file named *.tex: its default output is itself
    problem.write_text(open(SLINEAR).read())
    code, out, err = run("latex", "p.tex")
    assert "is the problem file being read" in one_line(code, err)
    assert problem.read_text() == open(SLINEAR).read()


@pytest.mark.parametrize("how", ["hardlink", "symlink"])
def test_a_link_to_the_input_is_the_input(tmp_path, how):
    problem = tmp_path / "p.yaml"
    problem.write_text(open(SLINEAR).read())
    alias = tmp_path / "alias.tex"
    (os.link if how == "hardlink" else os.symlink)(problem, alias)
    code, out, err = run("latex", str(problem), "-o", str(alias))
    assert "is the problem file being read" in one_line(code, err)
    assert problem.read_text() == open(SLINEAR).read()


def test_pdf_next_to_the_input_may_not_be_the_input(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    problem = tmp_path / "p.pdf"   # odd, but then --pdf's default PDF would be the problem file
    problem.write_text(open(SLINEAR).read())
    code, out, err = run("latex", "p.pdf", "--pdf")
    assert "p.pdf: is the problem file being read" in one_line(code, err)
    assert not (tmp_path / "p.tex").exists()  # refused before anything was written


# ----------------------------------------------------------------------------- read-only, symlinks, modes

def test_read_only_target_is_refused_and_kept(tmp_path):
    target = tmp_path / "out.tex"
    target.write_text("precious")
    target.chmod(0o444)
    code, out, err = run("latex", SLINEAR, "-o", str(target))
    assert one_line(code, err) == f"{target}: is read-only; it is left as it is, make it writable or give another " \
                                  "output name"
    assert target.read_text() == "precious" and stat.S_IMODE(target.stat().st_mode) == 0o444


def test_symlink_is_written_through(tmp_path):
    real = tmp_path / "real.tex"
    real.write_text("old")
    link = tmp_path / "link.tex"
    link.symlink_to(real)
    code, out, err = run("latex", SLINEAR, "-o", str(link))
    assert code == 0, err
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_text().startswith("\\documentclass")
    assert out == f"wrote {link}\n"


def test_dangling_symlink_is_refused(tmp_path):
    link = tmp_path / "link.tex"
    link.symlink_to(tmp_path / "elsewhere" / "x.tex")
    with pytest.raises(ProblemError, match="is a symbolic link to .*x.tex, which does not exist"):
        write_atomic(str(link), "data")
    assert not (tmp_path / "elsewhere").exists()


def test_a_device_is_not_replaced():
    with pytest.raises(ProblemError, match="is not a regular file"):
        check_target("/dev/null")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


@pytest.mark.parametrize("mask,mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_new_files_follow_the_umask(tmp_path, mask, mode):
    target = tmp_path / "new.tex"
    with umask(mask):
        assert output.umask() == mask
        write_atomic(str(target), "x")
    assert stat.S_IMODE(target.stat().st_mode) == mode


def test_existing_files_keep_their_mode(tmp_path):
    target = tmp_path / "old.tex"
    target.write_text("x")
    target.chmod(0o640)
    with umask(0o022):
        write_atomic(str(target), "y")
    assert target.read_text() == "y" and stat.S_IMODE(target.stat().st_mode) == 0o640


# ----------------------------------------------------------------------------- full disk, long names

@pytest.fixture
def full_disk(tmp_path):
    """A 64 KB tmpfs holding keep.tex ("precious") and filled up; where mounting is not
    allowed, the same directory with fsync patched to fail as a full disk does."""
    disk = tmp_path / "disk"
    disk.mkdir()
    try:
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)],
                                 capture_output=True).returncode == 0
    except OSError:  # no mount command here
        mounted = False
    try:
        (disk / "keep.tex").write_text("precious")
        if mounted:
            with open(disk / "filler", "wb", buffering=0) as fh, contextlib.suppress(OSError):
                while True:
                    fh.write(b"\0" * 1024)
            yield disk, None
        else:
            def no_space(fd):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            yield disk, no_space
    finally:
        if mounted:
            subprocess.run(["umount", str(disk)], check=True)


def test_full_disk_keeps_the_previous_file(full_disk, monkeypatch):
    disk, patch = full_disk
    if patch is not None:
        monkeypatch.setattr(os, "fsync", patch)
    target = disk / "keep.tex"
    code, out, err = run("latex", SLINEAR, "-o", str(target))
    assert one_line(code, err) == f"{target}: cannot write it: No space left on device; the previous file is unchanged"
    assert target.read_text() == "precious"
    assert not [p for p in disk.iterdir() if p.name.startswith(".adjoint-")]


def test_full_disk_new_file_writes_nothing(full_disk, monkeypatch):
    disk, patch = full_disk
    if patch is not None:
        monkeypatch.setattr(os, "fsync", patch)
    target = disk / "new.tex"
    code, out, err = run("latex", SLINEAR, "-o", str(target))
    assert one_line(code, err) == f"{target}: cannot write it: No space left on device; nothing was written"
    assert not target.exists() and not [p for p in disk.iterdir() if p.name.startswith(".adjoint-")]


def test_name_too_long_is_one_line(tmp_path):
    target = tmp_path / ("x" * 300 + ".tex")
    code, out, err = run("latex", SLINEAR, "-o", str(target))
    assert one_line(code, err) == f"{target}: cannot write it: File name too long; nothing was written"
    assert list(tmp_path.iterdir()) == []


def test_interrupted_write_leaves_no_temporary_file(tmp_path, monkeypatch):
    target = tmp_path / "keep.tex"
    target.write_text("precious")

    def interrupted(fd):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_atomic(str(target), "new")
    assert target.read_text() == "precious" and [p.name for p in tmp_path.iterdir()] == ["keep.tex"]


# ----------------------------------------------------------------------------- what -o names

def test_dash_o_dash_writes_tex_to_stdout(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run("latex", SLINEAR, "-o", "-")
    assert code == 0 and out.startswith("\\documentclass") and out.rstrip().endswith("\\end{document}")
    assert list(tmp_path.iterdir()) == []


def test_stdin_problem_latex_goes_to_stdout_and_needs_o_for_a_pdf(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    text = open(SLINEAR).read()
    code, out, err = run("latex", "-", input=text)
    assert code == 0 and out.startswith("\\documentclass")
    code, out, err = run("latex", "-", "--pdf", input=text)
    assert one_line(code, err).startswith("-: the problem comes from standard input")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.latex
@pytest.mark.parametrize("flag", [["--pdf"], []])
def test_o_pdf_writes_only_the_pdf(tmp_path, flag):
    target = tmp_path / "x.pdf"
    code, out, err = run("latex", SLINEAR, "-o", str(target), *flag)
    assert code == 0, err
    assert target.read_bytes().startswith(b"%PDF")
    assert [p.name for p in tmp_path.iterdir()] == ["x.pdf"]
    assert out == f"wrote {target}\n"


@pytest.mark.latex
def test_o_tex_with_pdf_writes_both_and_says_so(tmp_path):
    target = tmp_path / "x.tex"
    code, out, err = run("latex", SLINEAR, "-o", str(target), "--pdf")
    assert code == 0, err
    assert target.read_text().startswith("\\documentclass")
    assert (tmp_path / "x.pdf").read_bytes().startswith(b"%PDF")
    assert out == f"wrote {target} and {tmp_path / 'x.pdf'}\n"


@pytest.mark.latex
def test_o_dash_with_pdf_writes_the_pdf_to_stdout(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["latex", SLINEAR, "-o", "-", "--pdf"])
    assert result.exit_code == 0 and result.stdout_bytes.startswith(b"%PDF")
    assert list(tmp_path.iterdir()) == []
