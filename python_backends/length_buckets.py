"""Length buckets for batched encoders: rows of similar length run together, so a batch is not
padded to its one long input.

An encoder call costs about ``rows x longest row`` token slots (every row is padded to the
longest) plus a fixed cost per call. ``plan_buckets(lengths, call_overhead_tokens)`` splits one
batch's rows into the buckets that minimise ``sum(call_overhead_tokens + rows x longest)``: the
rows sorted by length, cut where a new call pays for itself (dynamic programming over the sorted
lengths, O(rows^2), a few ms for a 256-row batch; an optimal cut of sorted rows is contiguous, so
this is the optimum of every partition). ``run_bucketed`` runs a model per bucket and puts the
results back in the batch's order. Written here because the model runtimes do not do it: ONNX
Runtime runs the tensor it is given, and Triton's dynamic batcher groups requests, not rows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

DEFAULT_CALL_OVERHEAD_TOKENS = 32  # one encoder call's fixed cost, in padded-token slots


def plan_buckets(lengths: Sequence[int], call_overhead_tokens: int = DEFAULT_CALL_OVERHEAD_TOKENS) -> list[list[int]]:
    """Row indices per bucket (each bucket's rows in ascending length); see the module docstring."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    sorted_lengths = [lengths[i] for i in order]
    n = len(order)
    best = [0.0] + [float("inf")] * n  # best[j]: least cost of the j shortest rows
    cut = [0] * (n + 1)
    for end in range(1, n + 1):
        longest = sorted_lengths[end - 1]
        for start in range(end):
            cost = best[start] + call_overhead_tokens + (end - start) * longest
            if cost < best[end]:
                best[end], cut[end] = cost, start
    buckets: list[list[int]] = []
    end = n
    while end > 0:
        buckets.append(order[cut[end]:end])
        end = cut[end]
    return buckets[::-1]


def padded_slots(lengths: Sequence[int], buckets: Sequence[Sequence[int]]) -> int:
    """Token slots the buckets run (rows x each bucket's longest row)."""
    return sum(len(bucket) * max(lengths[i] for i in bucket) for bucket in buckets if bucket)


def run_bucketed(lengths: Sequence[int], run: Callable[[list[int]], np.ndarray],
                 call_overhead_tokens: int | None = DEFAULT_CALL_OVERHEAD_TOKENS) -> np.ndarray:
    """``run(rows)`` (the model on those rows, one output row each) per bucket, reassembled in the
    rows' order; ``call_overhead_tokens`` None: one call on every row (no buckets)."""
    if call_overhead_tokens is None:
        return run(list(range(len(lengths))))
    buckets = plan_buckets(lengths, call_overhead_tokens)
    parts = [(bucket, run(bucket)) for bucket in buckets]
    first = parts[0][1]
    out = np.empty((len(lengths), *first.shape[1:]), dtype=first.dtype)
    for bucket, result in parts:
        out[bucket] = result
    return out
