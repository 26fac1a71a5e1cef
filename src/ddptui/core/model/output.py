"""A rank's terminal output: every byte, addressed by absolute offset, the oldest dropped past a cap."""

from __future__ import annotations


class OutputLog:
    """Append-only bytes with absolute offsets; keeps at most `cap` bytes of the tail."""

    def __init__(self, cap: int = 8 * 1024 * 1024) -> None:
        self._data = bytearray()
        self._start = 0
        self._cap = cap
        self.end = 0
        """The absolute offset just past the last byte received (read it, never set it)."""

    @property
    def start(self) -> int:
        """The absolute offset of the oldest byte still kept; everything before it was dropped."""
        return self._start

    def append(self, data: bytes) -> None:
        """Add bytes, dropping the oldest half when the cap is passed."""
        self._data += data
        self.end += len(data)
        if len(self._data) > self._cap:
            drop = len(self._data) - self._cap // 2
            del self._data[:drop]
            self._start += drop

    def since(self, offset: int) -> bytes:
        """The bytes from absolute `offset` on (what is still kept of them)."""
        return bytes(self._data[max(offset - self._start, 0) :])

    def ends_with(self, suffix: bytes, offset: int) -> bool:
        """True when the bytes from absolute `offset` on end with `suffix` (no copy made)."""
        return self._data.endswith(suffix, max(offset - self._start, 0))

    def since_with_gap(self, offset: int) -> tuple[int, bytes]:
        """`(dropped, data)`: the bytes from `offset` on, and how many just before them were lost.

        `dropped` is 0 unless the cap dropped bytes at or after `offset`: a reader that fell that
        far behind can then say so (`... N bytes dropped ...`) instead of skipping silently.
        """
        return max(self._start - offset, 0), self.since(offset)

    def tail(self, size: int) -> bytes:
        """The last `size` bytes."""
        return bytes(self._data[-size:])
