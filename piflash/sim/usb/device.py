"""One simulated USB CMSIS-DAP device: descriptors, endpoints and the virtual time of transfers.

Descriptors follow USB 2.0 chapter 9 and the CMSIS-DAP specification's USB configuration: a v2
probe has a vendor-specific interface (class 0xFF, subclass 0) whose string contains
"CMSIS-DAP", with a bulk OUT endpoint 0x01 then a bulk IN endpoint 0x81; a v1 probe has a HID
interface (class 0x03, subclass 0) with an interrupt IN endpoint 0x81 and an interrupt OUT
endpoint 0x01, ``bInterval`` 1 (pyOCD's matchers: ``pyusb_v2_backend._match_cmsis_dap_v2_interface``
and ``pyusb_backend.MatchCmsisDapv1Interface``).

Transfers: an OUT transfer runs the DAP packet through the firmware at once (in the writer's
thread) and queues the response with the virtual time the host would have it. The response is
handed to pyOCD's receive thread only when the host actually waits for it (see
:meth:`SimUsbDevice.read_in`): that is when the host's clock advances to the response's time,
so the figures do not depend on how Python schedules pyOCD's two threads.
"""

from __future__ import annotations

import errno
import hashlib
import sys
import threading
import time
from collections import deque
from typing import Deque, Optional, Tuple

from ..store import SimStore
from .firmware import DapFirmware, Unplugged
from .presets import ProbePreset
from .timing import HOST_TRANSFER_S, Link, VirtualClock

__all__ = ["SimUsbDevice", "serial_for"]

#: String descriptor indexes.
I_MANUFACTURER, I_PRODUCT, I_SERIAL, I_INTERFACE = 1, 2, 3, 4
#: pyOCD's USB interface modules whose ``read()`` means "the host waits for a response".
_READERS = ("pyusb_backend.py", "pyusb_v2_backend.py")


#: DAPLink serial numbers start with the board ID pyOCD looks up in ``pyocd/board/board_ids.py``
#: (micro:bit 9900 is an nRF51, nRF52840-DK 1102 an nRF52840).
DAPLINK_BOARD_IDS = {"nrf51": "9900", "nrf52840": "1102"}


def serial_for(preset: ProbePreset, board_name: str, target: str = "") -> str:
    """The probe's USB serial number (its pyOCD unique ID): upper-case hex derived from the
    preset and board name, ``preset.serial_digits`` long, stable across runs; a DAPLink's
    starts with the board ID of a real board with the same target, as on hardware."""
    digest = hashlib.sha256(("%s:%s" % (preset.name, board_name)).encode()).hexdigest().upper()
    prefix = DAPLINK_BOARD_IDS.get(target, "") if preset.name == "daplink" else ""
    return (prefix + digest * 2)[:preset.serial_digits]


class _Desc:
    """A descriptor record (pyusb reads its fields as attributes)."""

    def __init__(self, **fields) -> None:
        self.__dict__.update(fields)
        self.extra_descriptors = []


class SimUsbDevice:
    """A simulated probe on the bus.

    :param preset: The probe model.
    :param board_name: The simulated board behind it (in ``store``).
    :param store: Board store.
    :param address: USB device address on bus 1.

    Attributes: ``serial`` (str), ``clock`` (:class:`VirtualClock`), ``firmware``,
    ``unplugged`` (bool; set by :meth:`unplug`), ``access_denied`` (bool: opening fails with
    EACCES, as a device node without permission does).
    """

    def __init__(self, preset: ProbePreset, board_name: str, store: SimStore, address: int) -> None:
        self.preset = preset
        self.board_name = board_name
        self.address = address
        try:
            target = store.get(board_name).target
        except Exception:       # not created yet: the serial then has no board ID
            target = ""
        self.serial = serial_for(preset, board_name, target)
        self.clock = VirtualClock()
        self.link = Link(preset)
        self.firmware = DapFirmware(preset, board_name, store, self.serial, self.clock)
        self.unplugged = False
        self.access_denied = False
        self.claimed = False
        self._responses: Deque[Tuple[bytes, float]] = deque()
        self._cond = threading.Condition()
        self.strings = {I_MANUFACTURER: preset.manufacturer, I_PRODUCT: preset.product,
                        I_SERIAL: self.serial, I_INTERFACE: preset.interface}
        hid = preset.cmsis_dap_version == 1
        self.device_descriptor = _Desc(
            bLength=18, bDescriptorType=1, bcdUSB=0x0200 if not hid else 0x0110,
            bDeviceClass=0x00 if hid else 0xEF, bDeviceSubClass=0x00 if hid else 0x02,
            bDeviceProtocol=0x00 if hid else 0x01, bMaxPacketSize0=64, idVendor=preset.vid,
            idProduct=preset.pid, bcdDevice=0x0100, iManufacturer=I_MANUFACTURER,
            iProduct=I_PRODUCT, iSerialNumber=I_SERIAL, bNumConfigurations=1, bus=1,
            address=address, port_number=address, port_numbers=(address,),
            speed=3 if preset.high_speed else 2)           # usb.util SPEED_HIGH / SPEED_FULL
        self.config_descriptor = _Desc(
            bLength=9, bDescriptorType=2, wTotalLength=9 + 9 + 7 + 7 + (9 if hid else 0),
            bNumInterfaces=1, bConfigurationValue=1, iConfiguration=0, bmAttributes=0x80,
            bMaxPower=50)
        self.interface_descriptor = _Desc(
            bLength=9, bDescriptorType=4, bInterfaceNumber=0, bAlternateSetting=0, bNumEndpoints=2,
            bInterfaceClass=0x03 if hid else 0xFF, bInterfaceSubClass=0, bInterfaceProtocol=0,
            iInterface=I_INTERFACE)
        kind = 0x03 if hid else 0x02                       # interrupt / bulk
        eps = [(0x81, kind), (0x01, kind)] if hid else [(0x01, kind), (0x81, kind)]
        self.endpoint_descriptors = [
            _Desc(bLength=7, bDescriptorType=5, bEndpointAddress=addr, bmAttributes=attr,
                  wMaxPacketSize=preset.max_packet, bInterval=1 if hid else 0, bRefresh=0,
                  bSynchAddress=0) for addr, attr in eps]

    # -- control -----------------------------------------------------------------------------
    def string_descriptor(self, index: int) -> bytes:
        """GET_DESCRIPTOR(STRING, index): index 0 lists the language IDs (0x0409, US English)."""
        if index == 0:
            return bytes([4, 3, 0x09, 0x04])
        text = self.strings.get(index)
        if text is None:
            raise KeyError(index)
        raw = text.encode("utf-16-le")
        return bytes([2 + len(raw), 3]) + raw

    def check_present(self) -> None:
        """:raises usb.core.USBError: ENODEV once the device is unplugged."""
        if self.unplugged:
            import usb.core
            raise usb.core.USBError("No such device (it may have been disconnected)", -4, errno.ENODEV)

    def unplug(self) -> None:
        """Pull the probe out of the USB port: every later access fails with ENODEV, and the
        board session is saved and released."""
        with self._cond:
            self.unplugged = True
            self._responses.clear()
            self._cond.notify_all()
        try:
            self.firmware.close()
        except Exception:
            pass

    def claim(self) -> None:
        """The host claimed the CMSIS-DAP interface: open the board behind the probe."""
        self.check_present()
        try:
            self.firmware.open()
        except Unplugged:
            self.unplug()
            self.check_present()
        self.claimed = True

    def release(self) -> None:
        """The host released the interface: save and release the board."""
        self.claimed = False
        with self._cond:
            self._responses.clear()
        self.firmware.close()

    # -- data --------------------------------------------------------------------------------
    def write_out(self, data: bytes) -> int:
        """An OUT transfer (bulk or interrupt) carrying one DAP packet; returns its length.

        :raises usb.core.USBError: ENODEV when unplugged (also when the probe vanishes while
            executing the packet).
        """
        self.check_present()
        clock = self.clock
        with self._cond:
            t_submit = clock.now + HOST_TRANSFER_S
            clock.count("usb_out")
            clock.count("bytes_out", len(data))
            t_arrive = self.link.out(t_submit, len(data))
            clock.charge("usb_out", t_arrive - t_submit)
            try:
                response, t_ready = self.firmware.execute(bytes(data), t_arrive)
            except Unplugged:
                pass
            else:
                if self.preset.cmsis_dap_version == 1:
                    response = response.ljust(self.preset.max_packet, b"\0")
                t_host = self.link.inn(t_ready, len(response))
                clock.charge("usb_in", t_host - t_ready)
                self._responses.append((response, t_host))
                clock.advance_to(t_arrive)
                self._cond.notify_all()
                return len(data)
        self.unplug()
        self.check_present()
        return 0

    def read_in(self, size: int, timeout_ms: int) -> bytes:
        """An IN transfer: the oldest response, handed over once the host waits for it.

        The host waits for a response when a thread sits in pyOCD's USB interface ``read()``
        for this probe (found in :func:`sys._current_frames`, read-only) or closes it; the
        host's clock then advances to the response's arrival. A read with no response pending
        times out after ``timeout_ms`` (pyOCD drains the endpoint that way when opening).

        :raises usb.core.USBError: ETIMEDOUT, or ENODEV when unplugged.
        """
        import usb.core
        deadline = time.monotonic() + max(timeout_ms, 1) / 1000.0
        with self._cond:
            while True:
                self.check_present()
                if self._responses and self._host_waits():
                    response, t_host = self._responses.popleft()
                    self.clock.count("usb_in")
                    self.clock.count("bytes_in", len(response))
                    self.clock.advance_to(t_host + HOST_TRANSFER_S)
                    return response[:size]
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise usb.core.USBError("Operation timed out", -7, errno.ETIMEDOUT)
                self._cond.wait(min(remaining, 0.0005 if self._responses else 0.05))

    def _host_waits(self) -> bool:
        me = threading.get_ident()
        for ident, frame in sys._current_frames().items():
            if ident == me:
                continue
            depth = 0
            while frame is not None and depth < 3:
                code = frame.f_code
                if code.co_name in ("read", "close") and code.co_filename.endswith(_READERS):
                    owner = frame.f_locals.get("self")
                    if getattr(owner, "serial_number", None) == self.serial:
                        return True
                frame = frame.f_back
                depth += 1
        return False
