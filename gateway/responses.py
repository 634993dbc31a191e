"""JSON responses serialised with orjson (numpy-aware, several times faster than the stdlib)."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.responses import JSONResponse as StarletteJSONResponse


class JSONResponse(StarletteJSONResponse):
    def render(self, content: Any) -> bytes:
        return orjson.dumps(content, option=orjson.OPT_SERIALIZE_NUMPY)
