"""Paged KV-cache accounting: a fixed pool of equal blocks of ``block_tokens`` token slots.

``BlockPool`` hands out block ids; a sequence holding ``n`` tokens of KV owns
``blocks_for(n)`` blocks. The pool only counts: the cells themselves live in llama.cpp's unified
KV cache, which is sized so that every token the pool admits has a cell. Contract: ``grow``
allocates all of what it is asked for or nothing; ``free`` returns every block of the owner.
"""

from __future__ import annotations


class BlockPool:
    def __init__(self, total_blocks: int, block_tokens: int) -> None:
        if total_blocks < 1 or block_tokens < 1:
            raise ValueError("a block pool needs at least one block of at least one token")
        self.total_blocks = total_blocks
        self.block_tokens = block_tokens
        self._free = list(range(total_blocks - 1, -1, -1))  # pop() hands out the lowest id
        self._owned: dict[int, list[int]] = {}

    @property
    def capacity_tokens(self) -> int:
        return self.total_blocks * self.block_tokens

    @property
    def used_blocks(self) -> int:
        return self.total_blocks - len(self._free)

    @property
    def free_blocks(self) -> int:
        return len(self._free)

    def blocks_for(self, tokens: int) -> int:
        """Blocks needed to hold ``tokens`` tokens."""
        return -(-tokens // self.block_tokens)

    def held(self, owner: int) -> int:
        return len(self._owned.get(owner, ()))

    def can_hold(self, owner: int, tokens: int) -> bool:
        """Whether ``owner`` could hold ``tokens`` tokens after a ``grow``."""
        return self.blocks_for(tokens) - self.held(owner) <= len(self._free)

    def grow(self, owner: int, tokens: int) -> bool:
        """Make ``owner`` hold blocks for ``tokens`` tokens; False (nothing allocated) if the
        pool lacks the blocks. Never shrinks."""
        missing = self.blocks_for(tokens) - self.held(owner)
        if missing <= 0:
            return True
        if missing > len(self._free):
            return False
        blocks = self._owned.setdefault(owner, [])
        blocks.extend(self._free.pop() for _ in range(missing))
        return True

    def free(self, owner: int) -> int:
        """Return every block of ``owner`` to the pool; the number freed."""
        blocks = self._owned.pop(owner, [])
        self._free.extend(reversed(blocks))
        return len(blocks)
