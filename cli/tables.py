"""Rich renderings of the control admin API's JSON for the operator CLI (``cli.ops``).

Each ``*_renderables`` function turns one response into tables and lines and never fails on a
``null`` or a missing field: what the API leaves out is shown as ``—``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from rich.console import Console, RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text

NONE = "—"
PIPED_WIDTH = 200  # columns of a table printed into a pipe or a file: wide enough that none is cut


def output_console(stderr: bool = False) -> Console:
    """A console of the terminal's width, or ``PIPED_WIDTH`` columns when output is not a terminal
    (rich would otherwise assume 80 and truncate columns in ``shunter … | grep``)."""
    console = Console(stderr=stderr)
    return console if console.is_terminal else Console(stderr=stderr, width=PIPED_WIDTH)


def when(value: Any) -> str:
    """Epoch seconds as ISO 8601 UTC (to the second); a string as given; nothing as ``—``."""
    if isinstance(value, bool) or value is None:
        return NONE
    if isinstance(value, int | float):
        return datetime.fromtimestamp(value, UTC).isoformat(timespec="seconds")
    return str(value)


def _text(value: Any) -> str:
    return NONE if value is None or value == "" else str(value)


def _version_key(item: tuple[str, Any]) -> tuple[int, str]:
    version = item[0]
    return (int(version), version) if str(version).isdigit() else (1 << 62, str(version))


def weights_text(weights: Mapping[str, Any] | None) -> str:
    """``{"2": 90.0, "3": 10.0}`` as ``v2 90% · v3 10%`` (by version)."""
    if not weights:
        return NONE
    return " · ".join(f"v{v} {float(w):g}%" for v, w in sorted(weights.items(), key=_version_key))


def pairs_text(values: Mapping[str, Any] | None) -> str:
    """``{"min_requests": 20.0, "window_s": 60}`` as ``min_requests 20, window_s 60`` (by key)."""
    if not values:
        return NONE
    return ", ".join(f"{k} {v:g}" if isinstance(v, int | float) and not isinstance(v, bool) else f"{k} {v}"
                     for k, v in sorted(values.items()))


def compact_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str) if value else NONE


def _percent(value: Any) -> str:
    return NONE if value is None else f"{float(value) * 100:.2f}%"


def _millis(value: Any) -> str:
    return NONE if value is None else f"{float(value) * 1000:.1f} ms"


def version_table(version: Mapping[str, Any]) -> Table:
    """One registered version (VersionJSON), a field per row."""
    table = Table(title=f"{version.get('model', '?')} v{version.get('version', '?')}", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")
    rows = (("state", version.get("state")), ("why", version.get("state_reason")),
            ("manifest digest", version.get("manifest_digest")),
            ("signer key id", version.get("signer_key_id")), ("artifact URI", version.get("artifact_uri")),
            ("requirements", compact_json(version.get("requirements"))),
            ("created", when(version.get("created_at"))), ("created by", version.get("created_by")))
    for name, value in rows:
        table.add_row(name, escape(_text(value)))
    return table


def models_table(models: Sequence[Mapping[str, Any]]) -> Table:
    """``GET /admin/v1/models``: model, kind, versions with their states, live weights."""
    table = Table(title="Models")
    for column in ("model", "kind", "versions", "live weights", "sticky"):
        table.add_column(column, overflow="fold")
    for model in models:
        versions = "\n".join(f"v{v.get('version', '?')} {v.get('state', '?')}"
                             + (f" ({v['state_reason']})" if v.get("state_reason") else "")
                             for v in model.get("versions") or ())
        alias = model.get("alias") or {}
        table.add_row(escape(_text(model.get("name"))), _text(model.get("kind")), _text(versions),
                      weights_text(alias.get("weights")), _text(alias.get("sticky")))
    return table


def _alias_table(alias: Mapping[str, Any]) -> Table:
    table = Table(title="Alias weights", min_width=40, caption=f"generation {_text(alias.get('generation'))}, "
                                                 f"sticky {_text(alias.get('sticky'))}")
    table.add_column("version", justify="right")
    table.add_column("weight", justify="right")
    for version, weight in sorted((alias.get("weights") or {}).items(), key=_version_key):
        table.add_row(f"v{version}", f"{float(weight):g}%")
    return table


def _rollout_table(rollout: Mapping[str, Any]) -> Table:
    table = Table(title=f"Rollout {_text(rollout.get('id'))}", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")
    baseline = rollout.get("baseline_version")
    rows = (("kind", _text(rollout.get("kind"))), ("status", _text(rollout.get("status"))),
            ("baseline", NONE if baseline is None else f"v{baseline}"),
            ("variants", weights_text(rollout.get("variants"))), ("sticky", _text(rollout.get("sticky"))),
            ("started", f"{when(rollout.get('started_at'))} by {_text(rollout.get('started_by'))}"),
            ("updated", when(rollout.get("updated_at"))), ("thresholds", pairs_text(rollout.get("thresholds"))))
    for name, value in rows:
        table.add_row(name, escape(value))
    return table


def _tenant_table(tenants: Mapping[str, Any]) -> Table:
    """Which version each tenant sits on under a split sticky to tenants."""
    by_version: dict[str, list[str]] = {}
    for tenant, version in sorted(tenants.items()):
        by_version.setdefault(str(version), []).append(tenant)
    table = Table(title="Tenants per version (sticky to tenant)")
    table.add_column("version", justify="right")
    table.add_column("tenants", justify="right")
    table.add_column("who", overflow="fold")
    for version, names in sorted(by_version.items(), key=_version_key):
        table.add_row(f"v{version}", f"{len(names)} of {len(tenants)}", escape(", ".join(names)))
    return table


def _metrics_table(versions: Mapping[str, Any]) -> Table:
    table = Table(title="Per-version metrics (analysis window)")
    for column in ("version", "requests", "errors", "error rate", "p99 latency"):
        table.add_column(column, justify="right")
    for version, metrics in sorted(versions.items(), key=_version_key):
        metrics = metrics or {}
        table.add_row(f"v{version}", _text(metrics.get("requests")), _text(metrics.get("errors")),
                      _percent(metrics.get("error_rate")), _millis(metrics.get("p99_latency_s")))
    return table


def _verdict_text(verdict: Mapping[str, Any]) -> list[RenderableType]:
    """The verdict's decision and reason, then its numbers as a table (never raw JSON)."""
    decision = str(verdict.get("decision", "?"))
    style = "red" if "rollback" in decision or "fail" in decision else "green" if decision == "healthy" else "yellow"
    text = Text.assemble(("Last verdict: ", "bold"), (decision, f"bold {style}"),
                         f" — {_text(verdict.get('reason'))}")
    if "at" in verdict:
        text.append(f" (at {when(verdict['at'])})")
    sides = [(name, verdict.get(name)) for name in ("baseline", "canary") if isinstance(verdict.get(name), Mapping)]
    parts: list[RenderableType] = [text]
    if sides:
        table = Table(title="Verdict window")
        for column in ("side", "version", "requests", "errors", "error rate", "p99 latency"):
            table.add_column(column, justify="right")
        for name, side in sides:
            assert isinstance(side, Mapping)
            table.add_row(name, f"v{_text(side.get('version'))}", _text(side.get("requests")),
                          _text(side.get("errors")), _percent(side.get("error_rate")),
                          _millis(side.get("p99_latency_s")))
        parts.append(table)
    thresholds = verdict.get("thresholds")
    if isinstance(thresholds, Mapping) and thresholds:
        parts.append(Text(f"thresholds: {pairs_text(thresholds)}", style="dim"))
    return parts


def status_renderables(status: Mapping[str, Any]) -> list[RenderableType]:
    """``GET /admin/v1/rollouts/{model}`` (StatusJSON): alias weights, rollout, window metrics, verdict."""
    model = escape(_text(status.get("model")))
    parts: list[RenderableType] = [Text.from_markup(f"[bold]{model}[/]")]
    alias, rollout = status.get("alias"), status.get("rollout")
    parts.append(_alias_table(alias) if alias else Text("no alias: the model serves its configured version"))
    parts.append(_rollout_table(rollout) if rollout else Text("no rollout"))
    tenants = status.get("tenant_versions")
    if tenants:
        parts.append(_tenant_table(tenants))
    versions = status.get("versions")
    parts.append(_metrics_table(versions) if versions else Text("no traffic metrics yet"))
    verdict = status.get("last_verdict")
    parts.extend(_verdict_text(verdict) if verdict else [Text("no verdict yet")])
    return parts


def audit_table(entries: Sequence[Mapping[str, Any]]) -> Table:
    """``GET /admin/v1/audit``: time, actor, action, subject, reason, details (compact JSON)."""
    table = Table(title="Audit log (newest first)")
    for column in ("time", "actor", "action", "subject", "reason"):
        table.add_column(column)
    table.add_column("details", overflow="fold")
    for entry in entries:
        table.add_row(when(entry.get("at")), escape(_text(entry.get("actor"))), _text(entry.get("action")),
                      escape(_text(entry.get("subject"))), escape(_text(entry.get("reason"))),
                      escape(compact_json(entry.get("details"))))
    return table


def keys_table(keys: Sequence[Mapping[str, Any]]) -> Table:
    """``GET /admin/v1/keys``: name, key id, file; control's own build key is marked."""
    table = Table(title="Trusted keys")
    for column in ("name", "key id", "file"):
        table.add_column(column)
    for key in keys:
        name = escape(_text(key.get("name"))) + (" (control build key)" if key.get("control_build_key") else "")
        table.add_row(name, _text(key.get("key_id")), escape(_text(key.get("file"))))
    return table


def prune_table(result: Mapping[str, Any]) -> Table:
    """``POST /admin/v1/prune``: what was (or would be) deleted, and the space freed."""
    verb = "would free" if result.get("dry_run") else "freed"
    total = float(result.get("verified_bytes") or 0)
    table = Table(title=f"Prune: {verb} {total / 1e6:.1f} MB of verified copies")
    for column in ("model", "version", "stored artifact", "verified copy"):
        table.add_column(column)
    for item in result.get("freed") or ():
        version = item.get("version")
        table.add_row(escape(_text(item.get("model"))) if item.get("model") else "(no version)",
                      NONE if version is None else f"v{version}",
                      "deleted" if item.get("store_deleted") else NONE,
                      f"{float(item.get('verified_bytes') or 0) / 1e6:.1f} MB")
    return table


def tokens_table(tokens: Sequence[Mapping[str, Any]]) -> Table:
    """``GET /admin/v1/tokens``: name, role, created (when, by whom); tokens themselves are never listed."""
    table = Table(title="Operator tokens")
    for column in ("name", "role", "created", "created by"):
        table.add_column(column)
    for token in tokens:
        table.add_row(escape(_text(token.get("name"))), _text(token.get("role")), when(token.get("created_at")),
                      escape(_text(token.get("created_by"))))
    return table
