"""A rank's terminal output: every byte, addressed by absolute offset, the oldest dropped past a cap."""

from __future__ import annotations


class OutputLog:
    """Append-only bytes with absolute offsets; keeps at most `cap` bytes of the tail."""

    def __init__(self, cap: int = 8 * 1024 * 1024) -> None:
        self._data = bytearray()
        self._start = 0
        self._cap = cap

    @property
    def end(self) -> int:
        """The absolute offset just past the last byte received."""
        return self._start + len(self._data)

    def append(self, data: bytes) -> None:
        """Add bytes, dropping the oldest half when the cap is passed."""
        self._data += data
        if len(self._data) > self._cap:
            drop = len(self._data) - self._cap // 2
            del self._data[:drop]
            self._start += drop

    def since(self, offset: int) -> bytes:
        """The bytes from absolute `offset` on (what is still kept of them)."""
        return bytes(self._data[max(offset - self._start, 0) :])

    def tail(self, size: int) -> bytes:
        """The last `size` bytes."""
        return bytes(self._data[-size:])
