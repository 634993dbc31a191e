"""Predictions: how long a request will wait, when its first output comes, what its prompt costs.

``Predictor`` (``predictor.py``) is the one object the scheduler, admission and placement ask;
the modules beside it are its parts, one concept each:

- ``start_wait``: when a queued request can start (``WaitEstimate``, admission's input);
- ``queued_work``: the work queued in the gateway ahead of a request;
- ``latency``: a request's first output on one endpoint (its engine's prefill line, then its own
  prompt), and the line bound that dispatch respects;
- ``prefill_line``: the line of prompts one engine was sent and has not prefilled, corrected by
  observed first tokens;
- ``prefill_cost``: what a prompt costs one engine, learned from those first tokens;
- ``prefix_reuse``: how much of a prompt an engine's prefix cache spares it.

The per-worker state (a ``PrefillLine``, a ``PrefillCost`` and the ``PrefixMemory`` of each
version) lives in the worker's ``workers.ModelLoad``, which moves with dispatches; the
``Predictor`` holds what is the gateway's (the work queued, the output requests generate).
Pure, like the rest of the core: time comes in as ``now``.

This package's ``__init__`` imports nothing, so that ``requests`` and ``workers`` may import its
value types without importing the ``Predictor`` (which imports them).
"""
