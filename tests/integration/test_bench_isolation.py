"""The bench's engine isolation on a real stack: the chat stub alone on its CPU, the rest elsewhere."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bench.cpu import EngineIsolation, model_stub_pid, pin_tree
from tests.integration.conftest import RunningStack

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")]


def _thread_affinities(pid: int) -> set[frozenset[int]]:
    return {frozenset(os.sched_getaffinity(int(task.name))) for task in Path(f"/proc/{pid}/task").iterdir()}


def test_pinning_puts_the_chat_stub_alone_on_the_last_cpu(stack: RunningStack) -> None:
    assert stack.stack.supervisor is not None and stack.stack.gateway is not None
    process = stack.stack.supervisor.workers[0].process
    assert process is not None
    everything = set(os.sched_getaffinity(0))
    isolation = EngineIsolation.last_cpu()
    try:
        pinned = isolation.pin_stack(process.pid, stack.stack.gateway.pid)
        stub = model_stub_pid(process.pid, "chat")
        embed_stub = model_stub_pid(process.pid, "embed")
        assert stub is not None and embed_stub is not None
        assert pinned["engine"] >= 1 and pinned["triton"] > pinned["engine"]
        assert _thread_affinities(stub) == {isolation.engine_cpus}
        assert _thread_affinities(embed_stub) == {isolation.other_cpus}
        assert _thread_affinities(process.pid) == {isolation.other_cpus}
        assert _thread_affinities(stack.stack.gateway.pid) == {isolation.other_cpus}
        assert os.sched_getaffinity(0) == isolation.other_cpus
    finally:
        pin_tree(process.pid, everything)
        pin_tree(stack.stack.gateway.pid, everything)
        pin_tree(os.getpid(), everything, descendants=False)
    with stack.client() as client:  # the stack serves on, unpinned
        answer = client.post("/v1/chat/completions", json={"model": "chat", "max_tokens": 4, "temperature": 0,
                                                           "messages": [{"role": "user", "content": "Hi"}]})
    assert answer.status_code == 200
