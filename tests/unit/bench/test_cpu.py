import os
import subprocess
import sys

import pytest

from bench.cpu import EngineIsolation, check_same_isolation, isolation_entry, pin_tree


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
def test_pinning_a_process_alone_leaves_its_children_where_they_were() -> None:
    cpus = sorted(os.sched_getaffinity(0))
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        pin_tree(child.pid, {cpus[-1]})
        pinned = pin_tree(os.getpid(), {cpus[0]}, descendants=False)
        assert pinned >= 1
        assert os.sched_getaffinity(child.pid) == {cpus[-1]}
        assert os.sched_getaffinity(0) == {cpus[0]}
        pin_tree(os.getpid(), {cpus[0]})  # with descendants: the child follows
        assert os.sched_getaffinity(child.pid) == {cpus[0]}
    finally:
        os.sched_setaffinity(0, set(cpus))
        child.kill()
        child.wait(10)


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
def test_engine_isolation_gives_the_engine_the_last_cpu_and_the_rest_the_others() -> None:
    cpus = sorted(os.sched_getaffinity(0))
    isolation = EngineIsolation.last_cpu()
    assert isolation.engine_cpus == {cpus[-1]}
    assert isolation.other_cpus == set(cpus[:-1])
    assert isolation.to_json() == {"model": "chat", "engine_cpus": [cpus[-1]], "other_cpus": cpus[:-1], "threads": 1}


def test_records_of_different_isolation_are_refused_together() -> None:
    isolated = {"isolation": {"model": "chat", "engine_cpus": [1], "other_cpus": [0], "threads": 1}}
    check_same_isolation("two isolated", isolated, isolation_entry(EngineIsolation(frozenset({1}), frozenset({0}))))
    assert isolation_entry(None) == {}
    check_same_isolation("two shared", {"step_law": {}}, {"results": []})
    with pytest.raises(ValueError, match="different engine isolation"):
        check_same_isolation("profile and replay", isolated, {"results": []})
