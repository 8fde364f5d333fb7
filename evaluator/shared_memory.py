"""Device memory that the judge allocates and a runner maps: the CUDA virtual memory API, with a POSIX file
descriptor as the handle that travels between the two processes.

- `allocate` creates the memory (`cuMemCreate`), maps it here and exports a descriptor; `import_fd` maps the same
  memory in another process. Both map it with the allocation's own granularity (2 MiB on Hopper).
- Why not a legacy IPC handle (`cudaIpcGetMemHandle`): a kernel reading its inputs through one ran 1.31x slower
  than on the same values in its own memory at 4096x16384x16384 on an H100 (4250 against 3238 us per launch,
  back to back, one process each way), while memory shared this way ran as fast as local memory (3229 us).
  Candidates run in runners and the baselines in the judge, so that cost fell on candidates alone.
- `supported` says whether the device can share memory this way; where it cannot, the arena falls back to a
  legacy IPC handle, and the judge's log says so.
- Driver calls through ctypes; no torch (runners import this).
"""

from __future__ import annotations

import ctypes
import os

from hgemm.evaluator.cudart import CudaError

_c = ctypes
POSIX_FD = 1  # CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
PINNED = 1  # CU_MEM_ALLOCATION_TYPE_PINNED
ON_DEVICE = 1  # CU_MEM_LOCATION_TYPE_DEVICE
READ_WRITE = 3  # CU_MEM_ACCESS_FLAGS_PROT_READWRITE
RECOMMENDED = 1  # CU_MEM_ALLOC_GRANULARITY_RECOMMENDED
ATTR_VMM = 102  # CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED
ATTR_POSIX_FD = 103  # CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED


class _Location(_c.Structure):
    _fields_ = [("type", _c.c_int), ("id", _c.c_int)]


class _AllocFlags(_c.Structure):
    _fields_ = [("compressionType", _c.c_ubyte), ("gpuDirectRDMACapable", _c.c_ubyte), ("usage", _c.c_ushort),
                ("reserved", _c.c_ubyte * 4)]  # fmt: skip


class _AllocationProp(_c.Structure):
    _fields_ = [("type", _c.c_int), ("requestedHandleTypes", _c.c_int), ("location", _Location),
                ("win32HandleMetaData", _c.c_void_p), ("allocFlags", _AllocFlags)]  # fmt: skip


class _AccessDesc(_c.Structure):
    _fields_ = [("location", _Location), ("flags", _c.c_int)]


_driver = None


def _cuda():
    global _driver
    if _driver is None:
        _driver = _c.CDLL("libcuda.so.1")
    return _driver


def _check(name: str, code: int) -> None:
    if code != 0:
        text = _c.c_char_p()
        _cuda().cuGetErrorName(code, _c.byref(text))
        raise CudaError(name, code, (text.value or b"CUDA_ERROR_UNKNOWN").decode())


def _prop(device: int) -> _AllocationProp:
    prop = _AllocationProp()
    prop.type, prop.requestedHandleTypes = PINNED, POSIX_FD
    prop.location = _Location(ON_DEVICE, device)
    return prop


def supported(device: int) -> bool:
    """Whether `device` can create memory exportable as a file descriptor."""
    try:
        cuda = _cuda()
    except OSError:
        return False
    for attribute in (ATTR_VMM, ATTR_POSIX_FD):
        value = _c.c_int(0)
        if cuda.cuDeviceGetAttribute(_c.byref(value), attribute, device) != 0 or not value.value:
            return False
    return True


def granularity(device: int) -> int:
    g = _c.c_size_t()
    _check("cuMemGetAllocationGranularity",
           _cuda().cuMemGetAllocationGranularity(_c.byref(g), _c.byref(_prop(device)), RECOMMENDED))  # fmt: skip
    return g.value


class Mapping:
    """`size` bytes of one allocation mapped at `ptr` in this process; `fd` is its exported descriptor (the
    allocating side only, else -1). `close` unmaps and releases what this process holds."""

    def __init__(self, handle: int, size: int, device: int, fd: int = -1):
        self.handle, self.size, self.fd, self.ptr = handle, size, fd, 0
        cuda = _cuda()
        ptr = _c.c_uint64()
        _check("cuMemAddressReserve", cuda.cuMemAddressReserve(_c.byref(ptr), _c.c_size_t(size),
                                                               _c.c_size_t(granularity(device)), _c.c_uint64(0),
                                                               _c.c_ulonglong(0)))  # fmt: skip
        try:
            _check("cuMemMap", cuda.cuMemMap(ptr, _c.c_size_t(size), _c.c_size_t(0), _c.c_ulonglong(handle),
                                             _c.c_ulonglong(0)))  # fmt: skip
            desc = _AccessDesc(_Location(ON_DEVICE, device), READ_WRITE)
            _check("cuMemSetAccess", cuda.cuMemSetAccess(ptr, _c.c_size_t(size), _c.byref(desc), _c.c_size_t(1)))
        except CudaError:
            cuda.cuMemUnmap(ptr, _c.c_size_t(size))
            cuda.cuMemAddressFree(ptr, _c.c_size_t(size))
            raise
        self.ptr = ptr.value

    def close(self) -> None:
        """Unmap, free the address range and release the handle (the memory lives on while another process
        still maps it). Call only once no work on it is pending."""
        cuda = _cuda()
        if self.ptr:
            cuda.cuMemUnmap(_c.c_uint64(self.ptr), _c.c_size_t(self.size))
            cuda.cuMemAddressFree(_c.c_uint64(self.ptr), _c.c_size_t(self.size))
            self.ptr = 0
        if self.handle:
            cuda.cuMemRelease(_c.c_ulonglong(self.handle))
            self.handle = 0
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def allocate(nbytes: int, device: int) -> Mapping:
    """New device memory of at least `nbytes`, mapped here, with a descriptor to share it by."""
    g = granularity(device)
    size = -(-nbytes // g) * g
    handle = _c.c_ulonglong()
    _check("cuMemCreate", _cuda().cuMemCreate(_c.byref(handle), _c.c_size_t(size), _c.byref(_prop(device)),
                                              _c.c_ulonglong(0)))  # fmt: skip
    fd = _c.c_int(-1)
    try:
        _check("cuMemExportToShareableHandle",
               _cuda().cuMemExportToShareableHandle(_c.byref(fd), handle, POSIX_FD, _c.c_ulonglong(0)))  # fmt: skip
        return Mapping(handle.value, size, device, fd.value)
    except CudaError:
        if fd.value >= 0:
            os.close(fd.value)
        _cuda().cuMemRelease(handle)
        raise


def import_fd(fd: int, size: int, device: int) -> Mapping:
    """Map the memory another process exported as `fd` (`size` as that process reported it). The caller may
    close `fd` afterwards: the mapping holds the memory."""
    handle = _c.c_ulonglong()
    _check("cuMemImportFromShareableHandle",
           _cuda().cuMemImportFromShareableHandle(_c.byref(handle), _c.c_void_p(fd), POSIX_FD))  # fmt: skip
    try:
        return Mapping(handle.value, size, device)
    except CudaError:
        _cuda().cuMemRelease(handle)
        raise
