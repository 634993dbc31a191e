"""Discrete-event simulator of GPU pools driving the ``scheduling`` core in virtual time.

The scheduler under test is the gateway's own (``scheduling.scheduler``), called by ``driver``
exactly as the gateway's dispatcher calls it; the rest of the package models what surrounds it:

- the event loop (``engine``: a heap in virtual time with stable tie-breaks) and the driver
  around the scheduler (``driver``, ``records``);
- the workers: an LLM engine with continuous batching and a paged KV pool (``llm_worker``,
  ``kv_blocks``), a batched non-LLM model (``batched_worker``), the serving path outside the
  engine (``served_path``);
- how long their work takes: the execution-time model (``perf``: GPUs from published figures, a
  CPU engine fitted to its measured steps), kept apart from scheduling;
- workloads, tenants and pools (``workloads``, ``small_trace``, ``tenancy``, ``pools``), the
  policies compared (``policies``, ``baselines``), metrics and reports (``metrics``,
  ``tracking``, ``report``);
- runs and experiments (``runner``, ``experiments``, ``noisy``, ``planning``, ``suite``), and the
  simulated side of the real-stack fidelity check (``replay_sim``).

Runs are deterministic: every RNG is seeded, and the same arguments give the same result.
"""
