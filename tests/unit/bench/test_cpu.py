import os
import subprocess
import sys

import pytest

from bench.cpu import pin_tree


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
