"""Multi-tenant scheduling on real Triton: a two-pool stack (``two_pools``), the noisy-neighbour and
overload scenarios (``scenarios``, ``traffic``), and the benchmark that runs them for the fair and the
FIFO gateway (``fair_vs_fifo``). The integration tests run the same scenarios, shorter, and assert
the targets; ``python -m bench tenancy`` runs them longer and prints ``docs/benchmarks.md`` rows."""
