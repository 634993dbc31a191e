"""Turn a stream of token bytes into text deltas that are safe to send to a client.

Two things make this more than ``bytes.decode``: a token may end inside a multi-byte UTF-8
character (the rest comes with the next token), and the text may be about to spell a stop string
(which must never reach the client). ``StopTextStream.push`` returns only text that is complete
UTF-8 and cannot be the start of a stop string; once a stop string appears it returns the text
before it and reports ``stopped``.
"""

from __future__ import annotations

import codecs
from collections.abc import Sequence


class StopTextStream:
    def __init__(self, stop: Sequence[str] = ()) -> None:
        self._stop = tuple(s for s in stop if s)
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._held = ""
        self.stopped = False

    def push(self, piece: bytes) -> str:
        """Feed one token's bytes; return the text now safe to emit (maybe empty)."""
        if self.stopped:
            return ""
        self._held += self._decoder.decode(piece)
        cut = self._first_stop_index()
        if cut is not None:
            self.stopped = True
            text, self._held = self._held[:cut], ""
            return text
        keep = self._partial_stop_length()
        text = self._held[: len(self._held) - keep]
        self._held = self._held[len(self._held) - keep :]
        return text

    def flush(self) -> str:
        """Everything still held back, at the end of generation."""
        if self.stopped:
            return ""
        text = self._held + self._decoder.decode(b"", final=True)
        self._held = ""
        return text

    def _first_stop_index(self) -> int | None:
        found = [i for i in (self._held.find(s) for s in self._stop) if i >= 0]
        return min(found) if found else None

    def _partial_stop_length(self) -> int:
        """Length of the longest suffix of the held text that is a proper prefix of a stop."""
        best = 0
        for stop in self._stop:
            for length in range(min(len(stop) - 1, len(self._held)), best, -1):
                if self._held.endswith(stop[:length]):
                    best = length
                    break
        return best
