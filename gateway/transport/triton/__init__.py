"""The ``Transport`` over Triton: worker clients and readiness (``workers``), batched calls
through row coalescers (``rows``, ``coalescer``), decoupled generation on reusable gRPC streams
(``generation``, ``streams``), the error translation (``errors``), and ``transport.TritonTransport``
that ties them together."""
