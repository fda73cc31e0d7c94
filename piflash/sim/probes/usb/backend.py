"""A pyusb backend (``usb.backend.IBackend``) whose bus holds simulated CMSIS-DAP probes and
simulated boards in USB BOOTSEL mode (:mod:`piflash.sim.probes.usb.picoboot`).

Everything above this class runs unmodified: pyusb's ``usb.core`` (devices, configurations,
string descriptors, endpoints), pyOCD's probe discovery and its CMSIS-DAP v1/v2 drivers. The
device objects pyusb passes back in are :class:`~piflash.sim.probes.usb.device.SimUsbDevice`; handles
are the same objects; a device with several interfaces (a BOOTSEL device) has ``interfaces``
and ``endpoints`` per interface and serves its endpoints itself (``bulk_out``, ``bulk_in``,
``control``). Errors are pyusb's ``USBError`` with the errno libusb would give: EACCES
from :meth:`open_device` for a device without permission, ENODEV once a device is unplugged,
ETIMEDOUT for a read with nothing to read.
"""

from __future__ import annotations

import errno
from typing import List

import usb.backend
import usb.core

from piflash.sim.probes.usb.device import SimUsbDevice

__all__ = ["SimUsbBackend"]


class SimUsbBackend(usb.backend.IBackend):
    """The simulated bus.

    :param devices: The probes plugged in (list of :class:`SimUsbDevice`).
    """

    def __init__(self, devices: List[SimUsbDevice]) -> None:
        self.devices = list(devices)

    # -- enumeration and descriptors ---------------------------------------------------------
    def enumerate_devices(self):
        """The devices still plugged in; a device that re-enumerated as another (a running Pico
        rebooted into BOOTSEL) is replaced by it, a BOOTSEL device whose board is off its port is
        not listed, and one that left the bus comes back when a new board is seated there."""
        self.devices = [getattr(d, "replacement", None) or d for d in self.devices]
        for i, d in enumerate(self.devices):
            if d.unplugged and hasattr(d, "replug"):  # the next Pico put on the port in BOOTSEL mode
                self.devices[i] = d.replug() or d
        return [d for d in self.devices if not d.unplugged and getattr(d, "on_fixture", lambda: True)()]

    def get_parent(self, dev):
        return None

    def get_device_descriptor(self, dev: SimUsbDevice):
        return dev.device_descriptor

    def get_configuration_descriptor(self, dev: SimUsbDevice, config: int):
        if config != 0:
            raise IndexError("configuration %d" % config)
        return dev.config_descriptor

    def get_interface_descriptor(self, dev: SimUsbDevice, intf: int, alt: int, config: int):
        if hasattr(dev, "interfaces"):
            if config != 0 or alt != 0 or intf not in dev.interfaces:
                raise IndexError("interface %d alt %d" % (intf, alt))
            return dev.interfaces[intf]
        if (config, intf, alt) != (0, 0, 0):
            raise IndexError("interface %d alt %d" % (intf, alt))
        return dev.interface_descriptor

    def get_endpoint_descriptor(self, dev: SimUsbDevice, ep: int, intf: int, alt: int, config: int):
        if hasattr(dev, "endpoints"):
            if config != 0 or alt != 0 or intf not in dev.endpoints:
                raise IndexError("interface %d alt %d" % (intf, alt))
            return dev.endpoints[intf][ep]
        if (config, intf, alt) != (0, 0, 0):
            raise IndexError("interface %d alt %d" % (intf, alt))
        return dev.endpoint_descriptors[ep]

    # -- handles -----------------------------------------------------------------------------
    def open_device(self, dev: SimUsbDevice) -> SimUsbDevice:
        """Open ``dev``. :raises usb.core.USBError: EACCES (no permission), ENODEV."""
        dev.check_present()
        if dev.access_denied:
            raise usb.core.USBError("Access denied (insufficient permissions)", -3, errno.EACCES)
        return dev

    def close_device(self, dev_handle: SimUsbDevice) -> None:
        return None

    def set_configuration(self, dev_handle: SimUsbDevice, config_value: int) -> None:
        dev_handle.check_present()

    def get_configuration(self, dev_handle: SimUsbDevice) -> int:
        dev_handle.check_present()
        return 1

    def set_interface_altsetting(self, dev_handle, intf, altsetting) -> None:
        dev_handle.check_present()

    def claim_interface(self, dev_handle: SimUsbDevice, intf: int) -> None:
        """Claiming the DAP (or PICOBOOT) interface opens the board session behind the device."""
        if hasattr(dev_handle, "bulk_out"):
            dev_handle.claim(intf)
            return
        dev_handle.claim()

    def release_interface(self, dev_handle: SimUsbDevice, intf: int) -> None:
        """Releasing it saves the board and ends the session."""
        if hasattr(dev_handle, "bulk_out"):
            dev_handle.release(intf)
        elif not dev_handle.unplugged:
            dev_handle.release()

    def is_kernel_driver_active(self, dev_handle, intf) -> bool:
        return False

    def detach_kernel_driver(self, dev_handle, intf) -> None:
        return None

    def attach_kernel_driver(self, dev_handle, intf) -> None:
        return None

    def clear_halt(self, dev_handle, ep) -> None:
        dev_handle.check_present()
        if hasattr(dev_handle, "clear_halt"):
            dev_handle.clear_halt(ep)

    def reset_device(self, dev_handle) -> None:
        dev_handle.check_present()

    # -- transfers ---------------------------------------------------------------------------
    def bulk_write(self, dev_handle: SimUsbDevice, ep: int, intf: int, data, timeout: int) -> int:
        if hasattr(dev_handle, "bulk_out"):
            return dev_handle.bulk_out(ep, bytes(data), timeout)
        if len(data) == 0:  # zero-length packet ending a transfer: nothing to run
            dev_handle.check_present()
            return 0
        return dev_handle.write_out(bytes(data))

    intr_write = bulk_write

    def bulk_read(self, dev_handle: SimUsbDevice, ep: int, intf: int, buff, timeout: int) -> int:
        if hasattr(dev_handle, "bulk_in"):
            data = dev_handle.bulk_in(ep, len(buff), timeout)
        else:
            data = dev_handle.read_in(len(buff), timeout)
        buff[: len(data)] = type(buff)(buff.typecode, data) if hasattr(buff, "typecode") else data
        return len(data)

    intr_read = bulk_read

    def ctrl_transfer(
        self, dev_handle: SimUsbDevice, bmRequestType: int, bRequest: int, wValue: int, wIndex: int, data, timeout: int
    ) -> int:
        """Standard GET_DESCRIPTOR (string and device) requests; others are accepted and
        ignored (HID SET_REPORT is not used: the OUT endpoint exists)."""
        dev_handle.check_present()
        if bmRequestType & 0x80 and bRequest == 6:  # GET_DESCRIPTOR
            kind, index = wValue >> 8, wValue & 0xFF
            if kind == 3:
                try:
                    raw = dev_handle.string_descriptor(index)
                except KeyError:
                    raise usb.core.USBError("Pipe error", -9, errno.EPIPE) from None
            else:
                raise usb.core.USBError("Pipe error", -9, errno.EPIPE)
            n = min(len(raw), len(data))
            data[:n] = type(data)(data.typecode, raw[:n])
            return n
        if hasattr(dev_handle, "control"):
            out = bytes(data) if not bmRequestType & 0x80 else b""
            raw = dev_handle.control(bmRequestType, bRequest, wValue, wIndex, len(data), out)
            if bmRequestType & 0x80:
                n = min(len(raw), len(data))
                data[:n] = type(data)(data.typecode, raw[:n])
                return n
            return len(data)
        return len(data) if not bmRequestType & 0x80 else 0
