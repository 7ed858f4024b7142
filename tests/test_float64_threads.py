"""--float64's BLAS pool: as many threads as the busier of the load average and the other
processes' tasks runnable now leaves cores idle (this process one of them), at least one; held
while a solve runs, then lifted (the counts below worked out by hand)."""

import os

import pytest

import adjoint.values.backends.float64 as f64


@pytest.mark.parametrize("cores,load,elsewhere,threads", [
    (2, 0.2, 0, 2),    # a quiet machine: both cores
    (2, 0.9, 0, 2),
    (2, 1.2, 0, 1),    # another job for most of the last minute
    (2, 0.1, 1, 1),    # a job that started seconds ago: the load average has not seen it yet
    (2, 3.7, 2, 1),    # busy: one thread, never none
    (4, 1.0, 1, 3),
    (4, 0.0, 0, 4),    # no /proc: the load average alone
    (1, 0.0, 0, 1),
])
def test_blas_threads_are_the_idle_cores(monkeypatch, cores, load, elsewhere, threads):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)), raising=False)
    monkeypatch.setattr(os, "getloadavg", lambda: (load, load, load))
    monkeypatch.setattr(f64, "_runnable_elsewhere", lambda: elsewhere)
    assert f64.blas_threads() == threads


@pytest.mark.parametrize("readings,threads", [
    ((1, 0, 1), 2),    # another task runnable for an instant: seen once, not a job
    ((0, 0, 1), 2),
    ((1, 1, 1), 1),    # a job: runnable in every reading
    ((2, 1, 2), 1),
])
def test_a_task_runnable_for_an_instant_does_not_halve_the_pool(monkeypatch, readings, threads):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(os, "getloadavg", lambda: (0.3, 0.3, 0.3))
    it = iter(readings)
    monkeypatch.setattr(f64, "_runnable_elsewhere", lambda: next(it))
    assert f64.blas_threads() == threads
    assert next(it, None) is None   # every reading was taken


def test_this_process_threads_are_not_counted_as_other_work(tmp_path):
    """/proc/loadavg's runnable count less this process's own running threads (a BLAS or OpenMP
    worker still spinning after its call is not another job): a /proc written by hand."""
    (tmp_path / "loadavg").write_text("3.10 2.50 1.90 6/312 4242\n")
    for tid, state in (("100", "R"), ("101", "S"), ("102", "R"), ("103", "D")):
        (tmp_path / "self" / "task" / tid).mkdir(parents=True)
        (tmp_path / "self" / "task" / tid / "stat").write_text(f"{tid} (a (b) c) {state} 1 2 3\n")
    assert f64._runnable_elsewhere(str(tmp_path)) == 4     # 6 runnable, 2 of them this process's
    assert f64._runnable_elsewhere(str(tmp_path / "missing")) == 0
    if os.path.exists("/proc/self/task"):
        assert f64._runnable_elsewhere() >= 0


def test_blas_limited_holds_the_pool_and_lifts_it(monkeypatch):
    threadpoolctl = pytest.importorskip("threadpoolctl")

    def blas():
        return [p["num_threads"] for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas"]

    before = blas()
    if not before:
        pytest.skip("numpy's BLAS is not one threadpoolctl sees")
    monkeypatch.setattr(f64, "blas_threads", lambda: 1)
    for _ in range(2):   # the second time through the controller made the first time
        with f64.blas_limited():
            assert set(blas()) == {1}
        assert blas() == before


@pytest.mark.parametrize("idle,pools,held", [
    (2, [{"num_threads": 2}], 2),     # a quiet machine, numpy's default pool
    (2, [{"num_threads": 1}], 1),     # OPENBLAS_NUM_THREADS=1: the user's pool is never grown
    (1, [{"num_threads": 4}], 1),     # a busy machine: lowered
    (2, [], 2),                       # no BLAS threadpoolctl sees: the idle cores
    (3, [{"num_threads": 8}, {"num_threads": 2}], 2),   # two BLAS libraries: the smaller pool
])
def test_a_solve_only_ever_lowers_the_pool(monkeypatch, idle, pools, held):
    monkeypatch.setattr(f64, "blas_threads", lambda: idle)
    assert f64.held_threads(pools) == held


def test_a_pool_sized_by_the_user_stays_as_small(monkeypatch):
    threadpoolctl = pytest.importorskip("threadpoolctl")

    def blas():
        return [p["num_threads"] for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas"]

    if not blas():
        pytest.skip("numpy's BLAS is not one threadpoolctl sees")
    monkeypatch.setattr(f64, "blas_threads", lambda: 64)
    with threadpoolctl.threadpool_limits(limits=1, user_api="blas"):
        with f64.blas_limited():
            assert set(blas()) == {1}
