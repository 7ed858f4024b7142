"""Robustness fuzzing: every mutated problem file gets a normal answer (exit 0) or the
one-line error (exit 2): never a traceback, an internal error (exit 3) or a hang.
Seeded (derandomized) so CI is stable; benchmarks/fuzz.py runs a longer sweep."""

import re
import time

from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings

from adjoint.cli import main
from adjoint.format.errors import MAX_REPORTED
from fuzzing import mutated_text

PER_RUN_SECONDS = 120   # a hang guard, not a speed goal (those live in benchmarks/): generous for a loaded 2-core machine
LOCATED = re.compile(r".+:\d+:\d+: \S")


def outcome(path: str, command: list[str]) -> tuple[int, str]:
    start = time.perf_counter()
    result = CliRunner().invoke(main, command + [path])
    elapsed = time.perf_counter() - start
    assert elapsed < PER_RUN_SECONDS, f"{command} took {elapsed:.1f}s"
    assert result.exit_code in (0, 2), (result.exit_code, result.stderr, repr(result.exception))
    if result.exit_code == 2:
        lines = result.stderr.splitlines()
        # one located line per independent mistake (at most MAX_REPORTED, and a line saying how many more)
        assert 1 <= len(lines) <= MAX_REPORTED + 1 and "Traceback" not in result.stderr, result.stderr
        assert len(lines) == 1 or all(LOCATED.match(line) for line in lines), result.stderr
        assert result.stdout == ""
    return result.exit_code, result.stderr


@settings(max_examples=120, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(text=mutated_text())
def test_mutated_problems_answer_or_fail_in_one_line(text, tmp_path):
    path = tmp_path / "mutant.yaml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    code, _ = outcome(str(path), ["solve", "--json"])
    if code == 0:
        outcome(str(path), ["latex", "-o", str(tmp_path / "out.tex")])
