"""control.errors: every control-plane exception is a ControlError, the drawn tree is the real
one, and the admin API maps the whole tree to HTTP in one place."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from typing import Any, cast

import pytest
from fastapi.testclient import TestClient

import control
from control import errors
from control.admin_api import ControlApiError, error_status
from control.deployer import DeployError
from control.errors import ControlError
from control.integrity import IntegrityError
from control.operator_auth import AccessError
from control.registry import RegistryConflictError, RegistryNotFoundError, RegistryValidationError
from control.registry.operator_tokens import Role
from control.rollouts import RolloutError
from control.service import create_control_app
from control.triton_control import TritonControlError
from settings.stack import StackConfig, TritonSettings

_TREE_LINE = re.compile(r"^    (?P<indent>(?:[│ ]   )*(?:[├└]── )?)(?P<name>[A-Z]\w+)\s+(?P<rest>.*)$")


def _control_exceptions() -> dict[str, type[BaseException]]:
    """Every exception class defined in a module of the control package, by name."""
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(control.__path__, "control."):
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == info.name:
                assert name not in found, f"two control exceptions are named {name}"
                found[name] = value
    return found


def _drawn_tree() -> dict[str, tuple[str | None, str]]:
    """name -> (parent name, the rest of its line) as drawn in control/errors.py's docstring."""
    assert errors.__doc__ is not None
    drawing = errors.__doc__.split("::\n", 1)[1]
    parents: list[str] = []
    tree: dict[str, tuple[str | None, str]] = {}
    for line in drawing.splitlines():
        match = _TREE_LINE.match(line)
        if match is None:
            continue
        depth = len(match["indent"]) // 4
        del parents[depth:]
        tree[match["name"]] = (parents[-1] if parents else None, match["rest"])
        parents.append(match["name"])
    return tree


def test_every_control_exception_is_a_control_error() -> None:
    exceptions = _control_exceptions()
    assert len(exceptions) >= 19
    outside = sorted(name for name, cls in exceptions.items() if not issubclass(cls, ControlError))
    assert outside == []


def test_the_drawn_tree_is_the_tree_in_the_code() -> None:
    exceptions = _control_exceptions()
    drawn = _drawn_tree()
    assert set(drawn) == set(exceptions)
    for name, (parent, rest) in drawn.items():
        cls = exceptions[name]
        control_bases = [b.__name__ for b in cls.__bases__ if issubclass(b, ControlError)]
        other_bases = sorted(b.__name__ for b in cls.__bases__ if not issubclass(b, ControlError))
        assert control_bases == ([parent] if parent else []), name
        if parent is not None:  # the root's own base is Exception
            assert sorted(re.findall(r"\[(\w+)\]", rest)) == [b for b in other_bases if b != "Exception"], name


def test_second_bases_still_catch_what_their_callers_catch() -> None:
    with pytest.raises(RuntimeError):
        raise DeployError("load", "no")
    with pytest.raises(ValueError):
        raise RegistryValidationError("bad weights")


@pytest.mark.parametrize(("error", "expected"), [
    (ControlApiError(409, "version_exists", "no"), (409, "version_exists")),
    (AccessError(401, "unauthenticated", "no"), (401, "unauthenticated")),
    (AccessError(403, "forbidden", "no", Role.OPERATOR), (403, "forbidden")),
    (RolloutError("not_settled", "split"), (409, "not_settled")),
    (IntegrityError("digest_mismatch", "changed"), (422, "digest_mismatch")),
    (DeployError("load", "failed"), (422, "load")),
    (RegistryNotFoundError("ghost"), (404, "not_found")),
    (RegistryConflictError("twice"), (409, "conflict")),
    (RegistryValidationError("bad"), (422, "invalid")),
    (TritonControlError("worker down"), (500, "internal_error")),
])
def test_each_error_maps_to_one_status_and_code(error: ControlError, expected: tuple[int, str]) -> None:
    assert error_status(error) == expected


def test_the_control_service_answers_any_control_error_with_the_error_body() -> None:
    config = StackConfig(triton=TritonSettings(), pools=(), models=())
    app = create_control_app(config, cast(Any, None), "token")

    @app.get("/boom")
    def boom() -> None:
        raise TritonControlError("worker local-cpu-0 did not load chat")

    client = TestClient(app, raise_server_exceptions=False)
    response = client.get("/boom")
    assert response.status_code == 500
    assert response.json() == {"error": {"message": "worker local-cpu-0 did not load chat",
                                         "type": "server_error", "code": "internal_error"}}
    refused = client.get("/admin/v1/models")
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthenticated"
    assert refused.headers["www-authenticate"] == "Bearer"
