"""Multi-tenant scheduling on real Triton: a two-pool stack, the noisy-neighbour and overload
scenarios, and their report. The integration tests run the same scenarios, shorter, and assert
the targets; ``python -m bench.tenancy`` runs them longer and writes ``docs/benchmarks.md`` rows."""
