"""Where the simulated pin devices meet python-periphery: its own ``os`` and ``fcntl`` calls.

python-periphery opens a device with ``os.open(devpath, os.O_RDWR)`` and drives it with
``fcntl.ioctl(fd, request, buffer)`` (``periphery/spi.py``; ``periphery/gpio_cdev2.py`` the
same for a GPIO chip), calling them through the modules it imported. :func:`install` gives those
modules' ``os`` and ``fcntl`` names a stand-in each that passes every call through to the real
module, except for the simulated device files: the file descriptor is real (a regular file the
simulation created, opened by the real ``os.open``), and an ``ioctl`` on it is answered by the
simulated device from the same bytes the kernel would get (the ``spi_ioc_transfer`` structs and
the buffers their addresses point at). That is as deep as a user-space simulation reaches: a
real character device would need CUSE (``/dev/cuse``, root and a FUSE library) or a kernel
module. Nothing of periphery's own code is replaced; its ``SPI`` class runs unchanged.
"""

from __future__ import annotations

import fcntl as _real_fcntl
import os as _real_os
import threading
from typing import Any, Dict, Optional, Tuple

__all__ = ["register", "unregister", "install", "uninstall", "device_for_fd", "open_registered"]

_devices: Dict[Tuple[int, int], Any] = {}  # (st_dev, st_ino) of a device file -> its device
_fds: Dict[int, Any] = {}  # open descriptors of device files -> their device
_lock = threading.Lock()
_installed: Dict[str, Tuple[Any, Any]] = {}


def register(path: str, device: Any) -> None:
    """Let ``device`` (with ``ioctl(request, arg, mutate)``, ``opened()``, ``closed()``) answer
    for the file ``path`` (str, an existing regular file)."""
    st = _real_os.stat(path)
    with _lock:
        _devices[(st.st_dev, st.st_ino)] = device


def unregister(path: str) -> None:
    """Forget the device behind ``path`` (str)."""
    try:
        st = _real_os.stat(path)
    except OSError:
        return
    with _lock:
        _devices.pop((st.st_dev, st.st_ino), None)


def open_registered(path: str) -> int:
    """Open the registered device file ``path`` (str) as the kernel hands out a new descriptor
    (a GPIO line request's): a real descriptor, whose ioctls and close reach the device."""
    fd = _real_os.open(path, _real_os.O_RDWR)
    st = _real_os.fstat(fd)
    device = _devices[(st.st_dev, st.st_ino)]
    _fds[fd] = device
    device.opened()
    return fd


def device_for_fd(fd: int) -> Optional[Any]:
    """The simulated device open on descriptor ``fd`` (int), or None."""
    return _fds.get(fd)


class _Os:
    """``os`` for periphery: ``open`` and ``close`` note the simulated device files."""

    def __getattr__(self, name: str) -> Any:
        return getattr(_real_os, name)

    @staticmethod
    def open(path: Any, flags: int, mode: int = 0o777, *, dir_fd: Optional[int] = None) -> int:
        fd = _real_os.open(path, flags, mode, dir_fd=dir_fd)
        st = _real_os.fstat(fd)
        device = _devices.get((st.st_dev, st.st_ino))
        if device is not None:
            _fds[fd] = device
            device.opened()
        return fd

    @staticmethod
    def close(fd: int) -> None:
        device = _fds.pop(fd, None)
        try:
            _real_os.close(fd)
        finally:
            if device is not None:
                device.closed()


class _Fcntl:
    """``fcntl`` for periphery: ``ioctl`` on a simulated device file goes to the device."""

    def __getattr__(self, name: str) -> Any:
        return getattr(_real_fcntl, name)

    @staticmethod
    def ioctl(fd: Any, request: int, arg: Any = 0, mutate_flag: bool = True) -> Any:
        device = _fds.get(fd if isinstance(fd, int) else fd.fileno())
        if device is None:
            return _real_fcntl.ioctl(fd, request, arg, mutate_flag)
        return device.ioctl(request, arg, mutate_flag)


def install() -> None:
    """Put the stand-ins into periphery's modules (``periphery.spi``, ``periphery.gpio_cdev2``
    where present). Idempotent.

    :raises ImportError: python-periphery is not installed.
    """
    import importlib

    for name in ("periphery.spi", "periphery.gpio_cdev2"):
        if name in _installed:
            continue
        try:
            module = importlib.import_module(name)
        except ImportError:
            if name == "periphery.spi":
                raise
            continue
        _installed[name] = (module.os, module.fcntl)
        module.os = _Os()  # type: ignore[attr-defined]
        module.fcntl = _Fcntl()  # type: ignore[attr-defined]


def uninstall() -> None:
    """Give periphery's modules their own ``os`` and ``fcntl`` back (tests)."""
    import sys

    for name, (os_mod, fcntl_mod) in list(_installed.items()):
        module = sys.modules.get(name)
        if module is not None:
            module.os = os_mod  # type: ignore[attr-defined]
            module.fcntl = fcntl_mod  # type: ignore[attr-defined]
        del _installed[name]
