"""Shared memory mappings of index files that keep no file descriptor open.

CPython's `mmap.mmap` duplicates the file's descriptor and keeps the duplicate for the
life of the mapping (for its size() and resize()), so every mapped index used to cost a
descriptor: three per active segment with the `.log`, where Kafka's JVM mappings cost
none. The kernel needs no descriptor to keep a mapping, so on Linux the index files are
mapped with libc's mmap through ctypes and the descriptor is closed right after; the
mapping is exposed as a writable memoryview, which `struct.pack_into`/`unpack_from` use
as they used the mmap object. Elsewhere (no libc mmap to call) it falls back to
`mmap.mmap` and its descriptor.

A memoryview over raw memory does not pin the mapping: after `close()` any view taken
from it would point at unmapped memory. The indexes only pass the view to struct calls
and copy bytes out of it, never keep a slice.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import sys
from collections.abc import Callable
from typing import NamedTuple

_MS_SYNC = 4  # <sys/mman.h> on Linux; the mmap module does not export it
_PYBUF_READ = 0x100
_PYBUF_WRITE = 0x200


class _Libc(NamedTuple):
    mmap: Callable[..., int | None]
    munmap: Callable[[int, int], int]
    msync: Callable[[int, int, int], int]
    madvise: Callable[[int, int, int], int]
    memoryview_from_memory: Callable[[int, int, int], memoryview]


def _libc() -> _Libc | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        map_, unmap, sync, advise = libc.mmap, libc.munmap, libc.msync, libc.madvise
        view = ctypes.pythonapi.PyMemoryView_FromMemory
    except (OSError, AttributeError):
        return None
    map_.restype = ctypes.c_void_p
    map_.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                     ctypes.c_int, ctypes.c_long]
    unmap.restype = sync.restype = advise.restype = ctypes.c_int
    unmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    sync.argtypes = advise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    view.restype = ctypes.py_object
    view.argtypes = [ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int]
    return _Libc(map_, unmap, sync, advise, view)


_LIBC = _libc()
_MAP_FAILED = ctypes.c_void_p(-1).value

KEEPS_DESCRIPTOR = _LIBC is None
"""True where a mapping still costs a descriptor (the mmap.mmap fallback)."""


def _os_error(what: str) -> OSError:
    errno = ctypes.get_errno()
    return OSError(errno, f"{what}: {os.strerror(errno)}")


class FileMapping:
    """A shared mapping of the first `length` bytes of an open file; the caller may close
    the descriptor once this is built. `view` is the buffer to read and write."""

    __slots__ = ("_address", "_length", "_mmap", "view")

    def __init__(self, fd: int, length: int, writable: bool) -> None:
        self._length = length
        self._address = 0
        self._mmap: mmap.mmap | None = None
        if _LIBC is None:
            access = mmap.ACCESS_WRITE if writable else mmap.ACCESS_READ
            self._mmap = mmap.mmap(fd, length, access=access)
            self._mmap.madvise(mmap.MADV_RANDOM)
            self.view: memoryview = memoryview(self._mmap)
            return
        protection = mmap.PROT_READ | (mmap.PROT_WRITE if writable else 0)
        address = _LIBC.mmap(None, length, protection, mmap.MAP_SHARED, fd, 0)
        if address is None or address == _MAP_FAILED:
            raise _os_error(f"mmap of {length} bytes failed")
        self._address = address
        # Lookups touch a few pages; kernel read-ahead (8 MiB on some VMs) made the first
        # write to a fresh 10 MiB index cost milliseconds.
        _LIBC.madvise(address, length, mmap.MADV_RANDOM)
        flags = _PYBUF_WRITE if writable else _PYBUF_READ
        self.view = _LIBC.memoryview_from_memory(address, length, flags)

    def __len__(self) -> int:
        return self._length

    def flush(self) -> None:
        """msync the whole mapping (its dirty pages reach the file on disk)."""
        if self._mmap is not None:
            self._mmap.flush()
        elif (self._address and _LIBC is not None
              and _LIBC.msync(self._address, self._length, _MS_SYNC) != 0):
            raise _os_error("msync failed")

    def close(self) -> None:
        """Unmap; closing twice is harmless. Dirty pages of a shared mapping stay in the
        page cache and reach the file as usual."""
        self.view.release()
        if self._mmap is not None:
            self._mmap.close()
            self._mmap = None
        elif self._address and _LIBC is not None:
            _LIBC.munmap(self._address, self._length)
            self._address = 0
