"""The control plane's error tree: everything it raises on purpose is a ``ControlError``.

Each class lives beside the code that raises it (module named first below); this module holds
the root and draws the tree, which ``tests/unit/control/test_errors.py`` holds to the code. A
class that also derives from ``RuntimeError`` or ``ValueError`` (in brackets) keeps that base, so
callers that catch it still do. The admin API maps the tree to HTTP statuses in one place,
``control.admin_api.error_status``.

::

    ControlError                     base of everything the control plane raises on purpose
    ├── ArtifactStoreError           artifacts.py: the store could not do what was asked
    │   ├── ArtifactExistsError      the version is already stored; versions are immutable
    │   └── ArtifactNotFoundError    nothing is stored under the URI or version
    ├── IntegrityError               integrity.py: an artifact or key failed a check (``code``)
    ├── ArtifactLayoutError          artifact_layout.py [ValueError]: an artifact's files do not fit its kind
    ├── RegistryError                registry/errors.py: the registry refused a call
    │   ├── RegistryConflictError    the change collides with what is stored
    │   ├── RegistryNotFoundError    the model, version or rollout named is not registered
    │   └── RegistryValidationError  [ValueError] the arguments are malformed
    ├── RenderError                  repository.py [RuntimeError]: the repository cannot be rendered
    ├── DeployError                  deployer.py [RuntimeError]: a version cannot be staged or served (``code``)
    ├── RolloutError                 rollouts.py [RuntimeError]: a rollout action cannot be done (``code``, ``status``)
    ├── GatewayProbeError            gateway_probe.py [RuntimeError]: a gateway did not confirm in time
    ├── TritonControlError           triton_control.py [RuntimeError]: a load, wait or warm request failed
    ├── TritonNotFoundError          triton_runtime.py [RuntimeError]: no usable tritonserver binary
    ├── WorkerStartError             supervisor.py [RuntimeError]: a worker did not become ready in time
    ├── StackStartError              stack.py [RuntimeError]: a part of the local stack did not come up
    ├── RedisStartError              redis_server.py [RuntimeError]: the stack's redis-server did not come up
    ├── PrometheusStartError         prometheus.py [RuntimeError]: prometheus is not installed
    ├── ExportVerificationError      assets/efficientnet_lite.py [RuntimeError]: the ONNX export disagrees
    ├── CapacityError                capacity/controller.py: a capacity change is refused (``status``, ``code``)
    ├── HousekeepingError            housekeeping.py: a deletion would lose what is still needed (``code``, ``status``)
    ├── AccessError                  operator_auth.py: no valid token (401) or too low a role (403) (``code``)
    └── ControlApiError              admin_api.py: the admin API refuses a request (``status``, ``code``)
"""

from __future__ import annotations


class ControlError(Exception):
    """Base of every error the control plane raises on purpose; the message says what and where."""
