"""The registry's error tree, a branch of the control plane's (``control/errors.py``).

::

    RegistryError                  base of everything the registry raises on purpose
    ├── RegistryConflictError      the change collides with what is stored (duplicate, active rollout)
    ├── RegistryNotFoundError      a model, version or rollout that the change names does not exist
    └── RegistryValidationError    the arguments are malformed (weights, sticky, kind, numbers)
"""

from __future__ import annotations

from control.errors import ControlError


class RegistryError(ControlError):
    """Base of the registry's errors; the message says what was wrong and with which subject."""


class RegistryConflictError(RegistryError):
    """The change collides with the stored state (a duplicate version, a second active rollout)."""


class RegistryNotFoundError(RegistryError):
    """A model, version or rollout named by the call is not registered."""


class RegistryValidationError(RegistryError, ValueError):
    """The call's arguments are malformed; nothing was written."""
