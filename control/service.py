"""The control service's admin API (read side): workers, their models and readiness.

Authenticated with its own admin bearer token, separate from tenant API keys. The CLI's
``status`` and operators' tools read it; it never serves inference.
"""

from __future__ import annotations

import hmac
from typing import Annotated, Any

import httpx
from fastapi import Depends, FastAPI, Header, HTTPException

from control.config import StackConfig
from control.supervisor import Supervisor


def create_control_app(config: StackConfig, supervisor: Supervisor, admin_token: str) -> FastAPI:
    app = FastAPI(title="Shunter control", docs_url=None, redoc_url=None)

    def require_admin(authorization: Annotated[str, Header()] = "") -> None:
        expected = f"Bearer {admin_token}"
        if not hmac.compare_digest(authorization.encode(), expected.encode()):
            raise HTTPException(status_code=401, detail="admin token required")

    @app.get("/admin/v1/workers", dependencies=[Depends(require_admin)])
    def workers() -> list[dict[str, Any]]:
        rows = []
        with httpx.Client(timeout=2.0) as client:
            for worker in supervisor.workers:
                address = worker.address
                rows.append({
                    "name": address.name, "pool": address.pool, "gpu_type": address.gpu_type,
                    "region": address.region, "grpc": f"{address.host}:{address.grpc_port}",
                    "pid": worker.process.pid if worker.process else None,
                    "alive": worker.alive(), "restarts": worker.restarts,
                    "models": worker.models_ready(client) if worker.alive() else {},
                })
        return rows

    @app.get("/admin/v1/models", dependencies=[Depends(require_admin)])
    def models() -> list[dict[str, Any]]:
        return [
            {"name": m.name, "kind": m.kind.value, "version": m.version,
             "max_batch_size": m.batching.max_batch_size, "instances": m.instances}
            for m in config.models
        ]

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    return app
