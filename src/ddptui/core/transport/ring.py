"""A byte ring in shared memory (a memfd mapped by two processes): the pty pump writes a rank's
terminal output into it, ddptui takes from it. Standard library only: the pump process imports it.
"""

from __future__ import annotations

import contextlib
import mmap
import os

HEADER = 64
"""Bytes before a ring's data: four 64-bit slots, each written by one side only."""
WRITTEN, TAKEN, CLOSED, FLUSHED = range(4)
"""Slots: bytes the pump wrote (ever), bytes ddptui took (ever), the pump read EOF, the pump
drained the pty after an `F` request."""
RING_SIZE = 1 << 20
"""Bytes a ring holds: a flooding rank runs this far ahead of the UI before it blocks. A larger ring
lets ranks drain faster but makes keys wait longer: unthrottled writers take the UI's CPU on a
2-core machine (`bench/ui_flood.py` times both)."""


class Ring:
    """A byte ring in shared memory: the pump writes at `WRITTEN`, ddptui takes at `TAKEN`.

    Each counter only grows and has one writer; x86-64 keeps stores in order and an aligned
    8-byte slot is written in one store, so a reader that sees a count also sees its bytes.
    """

    def __init__(self, fd: int, size: int) -> None:
        self.size = size
        self._map = mmap.mmap(fd, HEADER + size)
        self.slots = memoryview(self._map)[:HEADER].cast("Q")
        self.data = memoryview(self._map)[HEADER:]

    @classmethod
    def create(cls, size: int = RING_SIZE) -> tuple[Ring, int]:
        """A new ring and the memfd to hand the pump (the caller closes it once sent)."""
        fd = os.memfd_create("ddptui-ring", os.MFD_CLOEXEC)
        os.ftruncate(fd, HEADER + size)
        return cls(fd, size), fd

    @classmethod
    def available(cls) -> bool:
        """True where a ring can be made: memfd_create (Linux 3.17 and later, a Python that has it)."""
        try:
            ring, fd = cls.create(mmap.PAGESIZE)
        except (OSError, AttributeError):
            return False
        os.close(fd)
        ring.close()
        return True

    def unread(self) -> int:
        """Bytes written and not yet taken."""
        return int(self.slots[WRITTEN] - self.slots[TAKEN])

    def free(self) -> list[memoryview]:
        """The free space as at most two views, in order (empty when the ring is full)."""
        written, room = self.slots[WRITTEN], self.size - self.unread()
        start = written % self.size
        first = min(room, self.size - start)
        views = [self.data[start : start + first], self.data[: room - first]]
        return [view for view in views if len(view)]

    def wrote(self, count: int) -> None:
        """Publish `count` bytes just written into the free space (after the bytes themselves)."""
        self.slots[WRITTEN] += count

    def take(self, cap: int) -> bytes:
        """Up to `cap` unread bytes, oldest first; their space is free again afterwards."""
        taken = self.slots[TAKEN]
        count = min(self.unread(), cap)
        start = taken % self.size
        first = min(count, self.size - start)
        data = bytes(self.data[start : start + first]) + bytes(self.data[: count - first])
        self.slots[TAKEN] = taken + count
        return data

    def close(self) -> None:
        """Unmap (the other side's mapping stays valid); a view still held defers it to the GC."""
        self.slots.release()
        self.data.release()
        with contextlib.suppress(BufferError):
            self._map.close()
