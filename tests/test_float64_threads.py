"""--float64's BLAS pool: as many threads as the busier of the load average and the tasks runnable
now leaves cores idle (this process one of them), at least one; held while a solve runs, then
lifted (the counts below worked out by hand)."""

import os

import pytest

import adjoint.values.backends.float64 as f64


@pytest.mark.parametrize("cores,load,runnable,threads", [
    (2, 0.2, 1, 2),    # a quiet machine: both cores
    (2, 0.9, 1, 2),
    (2, 1.2, 1, 1),    # another job for most of the last minute
    (2, 0.1, 2, 1),    # a job that started seconds ago: the load average has not seen it yet
    (2, 3.7, 3, 1),    # busy: one thread, never none
    (4, 1.0, 2, 3),
    (4, 0.0, 0, 4),    # no /proc/loadavg: the load average alone
    (1, 0.0, 1, 1),
])
def test_blas_threads_are_the_idle_cores(monkeypatch, cores, load, runnable, threads):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)), raising=False)
    monkeypatch.setattr(os, "getloadavg", lambda: (load, load, load))
    monkeypatch.setattr(f64, "_runnable_now", lambda: runnable)
    assert f64.blas_threads() == threads


def test_the_runnable_count_is_read_from_proc():
    if not os.path.exists("/proc/loadavg"):
        pytest.skip("no /proc/loadavg here")
    assert f64._runnable_now() >= 1   # this test's own thread is running


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
