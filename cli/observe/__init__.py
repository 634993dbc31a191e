"""Observability as code: Prometheus rules and Grafana dashboards rendered from the stack's configuration."""
