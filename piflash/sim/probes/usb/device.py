"""One simulated USB CMSIS-DAP device: descriptors, endpoints and the virtual time of transfers.

Descriptors follow USB 2.0 chapter 9 and the CMSIS-DAP specification's USB configuration: a v2
probe has a vendor-specific interface (class 0xFF, subclass 0) whose string contains
"CMSIS-DAP", with a bulk OUT endpoint 0x01 then a bulk IN endpoint 0x81; a v1 probe has a HID
interface (class 0x03, subclass 0) with an interrupt IN endpoint 0x81 and an interrupt OUT
endpoint 0x01, ``bInterval`` 1 (pyOCD's matchers: ``pyusb_v2_backend._match_cmsis_dap_v2_interface``
and ``pyusb_backend.MatchCmsisDapv1Interface``).

Transfers: an OUT transfer runs the DAP packet through the firmware at once (in the writer's
thread) and queues the response with the virtual time the host would have it; pyOCD's receive
thread gets it as soon as it asks. When the host *waits* for a response is read from pyOCD's own
bookkeeping, not from thread timing: pyOCD's ``DAPAccessCMSISDAP`` keeps the packets written but
not yet read in ``_commands_to_read`` (``probe/pydapaccess/dap_access_cmsis_dap.py``), so the
responses it has consumed are those written minus those outstanding. Before each OUT transfer
(and whenever the clock is read) the host clock advances to the arrival of every response
consumed since; the object is found, read-only, on the writing thread's own stack. The figures
therefore depend only on the order of pyOCD's main-thread actions, never on how Python schedules
pyOCD's two threads. An interface that holds packets back to send several in one transfer
(piflash's, for the Debug Probe) has packets in that list that are not on the bus yet; it counts
the responses it handed to pyOCD in ``responses_taken``, which is used instead. Should neither
be there, the host is taken to wait for every response before its next transfer (no
pipelining), which is slower but still deterministic.

Threads: the host clock is that of the thread that claimed the interface (pyOCD's session
thread). A synchronous OUT transfer blocks the thread that submits it: submitted from the
claiming thread, the host clock waits for it; submitted from another thread (an interface's
writer thread), only that thread waits: the host clock is charged the packets' CPU and goes on,
and the next transfer from the other thread starts no earlier than this one completed. Such a
thread reads ``responses_taken`` as the count when it was handed the transfer (the interface's
to give), so the figures stay independent of thread timing.
"""

from __future__ import annotations

import errno
import hashlib
import sys
import threading
import time
from collections import deque
from typing import Deque, Dict, List, Optional, Tuple, Union

from piflash.sim.probes.usb.firmware import DapFirmware, Unplugged
from piflash.sim.probes.usb.ledger import ledger_from_env
from piflash.sim.probes.usb.presets import ProbePreset
from piflash.sim.probes.usb.timing import HOST_TRANSFER_S, Link, VirtualClock, phase_cost
from piflash.sim.store import SimStore

__all__ = ["SimUsbDevice", "serial_for", "describe", "string_descriptor"]

#: String descriptor indexes.
I_MANUFACTURER, I_PRODUCT, I_SERIAL, I_INTERFACE = 1, 2, 3, 4
#: Where pyOCD's CMSIS-DAP access layer lives (its ``_send_packet`` frame calls our write).
_DAP_ACCESS_FILE = "dap_access_cmsis_dap.py"


#: DAPLink serial numbers start with the board ID pyOCD looks up in ``pyocd/board/board_ids.py``
#: (micro:bit 9900 is an nRF51, nRF52840-DK 1102 an nRF52840).
DAPLINK_BOARD_IDS = {"nrf51": "9900", "nrf52840": "1102"}


def serial_for(preset: ProbePreset, board_name: str, target: str = "") -> str:
    """The probe's USB serial number (its pyOCD unique ID): upper-case hex derived from the
    preset and board name, ``preset.serial_digits`` long, stable across runs; a DAPLink's
    starts with the board ID of a real board with the same target, as on hardware."""
    digest = hashlib.sha256(("%s:%s" % (preset.name, board_name)).encode()).hexdigest().upper()
    prefix = DAPLINK_BOARD_IDS.get(target, "") if preset.name == "daplink" else ""
    return (prefix + digest * 2)[: preset.serial_digits]


def string_descriptor(strings, index: int) -> bytes:
    """The bytes of GET_DESCRIPTOR(STRING, ``index``) for a device whose strings are ``strings``
    (index -> str): index 0 lists the language IDs (0x0409, US English; USB 2.0 9.6.7).

    :raises KeyError: no such string.
    """
    if index == 0:
        return bytes([4, 3, 0x09, 0x04])
    raw = strings[index].encode("utf-16-le")
    return bytes([2 + len(raw), 3]) + raw


class _Desc:
    """A descriptor record (pyusb reads its fields as attributes)."""

    def __init__(self, **fields) -> None:
        self.__dict__.update(fields)
        self.extra_descriptors = []


def describe(dev, preset: ProbePreset, serial: str, address: int) -> None:
    """Give ``dev`` the USB descriptors of a ``preset`` probe with this ``serial`` at
    ``address``: ``strings`` (index -> str), ``device_descriptor``, ``config_descriptor``,
    ``interface_descriptor``, ``endpoint_descriptors`` (what :class:`SimUsbBackend` hands pyusb;
    shared with the replay device of :mod:`piflash.sim.probes.usb.replay`)."""
    dev.strings = {
        I_MANUFACTURER: preset.manufacturer,
        I_PRODUCT: preset.product,
        I_SERIAL: serial,
        I_INTERFACE: preset.interface,
    }
    hid = preset.cmsis_dap_version == 1
    dev.device_descriptor = _Desc(
        bLength=18,
        bDescriptorType=1,
        bcdUSB=0x0110 if hid else 0x0210,
        bDeviceClass=0x00,
        bDeviceSubClass=0x00,  # each interface names its class
        bDeviceProtocol=0x00,
        bMaxPacketSize0=64,
        idVendor=preset.vid,
        idProduct=preset.pid,
        bcdDevice=preset.bcd_device,
        iManufacturer=I_MANUFACTURER,
        iProduct=I_PRODUCT,
        iSerialNumber=I_SERIAL,
        bNumConfigurations=1,
        bus=1,
        address=address,
        port_number=address,
        port_numbers=(address,),
        speed=3 if preset.high_speed else 2,
    )  # usb.util SPEED_HIGH / SPEED_FULL
    dev.config_descriptor = _Desc(
        bLength=9,
        bDescriptorType=2,
        wTotalLength=9 + 9 + 7 + 7 + (9 if hid else 0),
        bNumInterfaces=1,
        bConfigurationValue=1,
        iConfiguration=0,
        bmAttributes=0x80,
        bMaxPower=50,
    )
    dev.interface_descriptor = _Desc(
        bLength=9,
        bDescriptorType=4,
        bInterfaceNumber=0,
        bAlternateSetting=0,
        bNumEndpoints=2,
        bInterfaceClass=0x03 if hid else 0xFF,
        bInterfaceSubClass=0,
        bInterfaceProtocol=0,
        iInterface=I_INTERFACE,
    )
    kind = 0x03 if hid else 0x02  # interrupt / bulk
    eps = [(0x81, kind), (0x01, kind)] if hid else [(0x01, kind), (0x81, kind)]
    dev.endpoint_descriptors = [
        _Desc(
            bLength=7,
            bDescriptorType=5,
            bEndpointAddress=addr,
            bmAttributes=attr,
            wMaxPacketSize=preset.max_packet,
            bInterval=1 if hid else 0,
            bRefresh=0,
            bSynchAddress=0,
        )
        for addr, attr in eps
    ]


class SimUsbDevice:
    """A simulated probe on the bus.

    :param preset: The probe model.
    :param board_name: The simulated board behind it (in ``store``).
    :param store: Board store.
    :param address: USB device address on bus 1.
    :param serial: its USB serial number (str), or None for :func:`serial_for`'s.

    Attributes: ``serial`` (str), ``clock`` (:class:`VirtualClock`), ``firmware``,
    ``unplugged`` (bool; set by :meth:`unplug`), ``access_denied`` (bool: opening fails with
    EACCES, as a device node without permission does), ``ledger`` (a
    :class:`~piflash.sim.probes.usb.ledger.Ledger` when ``PIFLASH_SIM_USB_LEDGER`` is set, else None),
    ``host_transfer_s`` (CPU seconds the host spends per DAP packet it submits or completes:
    a float, the same in every phase, or a dict phase name -> seconds with a ``"*"`` default,
    a host preset's figures for one tool, :attr:`~piflash.sim.probes.usb.timing.HostPreset.transfer_s`,
    of which the figure of the clock's phase (:attr:`VirtualClock.phase`) at the time of the
    packet is charged; default :data:`~piflash.sim.probes.usb.timing.HOST_TRANSFER_S`), ``recording`` (None, or a list
    that every OUT packet and its response are appended to as ``(bytes, bytes)``: the traffic
    :mod:`piflash.sim.probes.usb.replay` plays back).
    """

    def __init__(
        self, preset: ProbePreset, board_name: str, store: SimStore, address: int, serial: Optional[str] = None
    ) -> None:
        self.preset = preset
        self.board_name = board_name
        self.address = address
        try:
            target = store.get(board_name).target
        except Exception:  # not created yet: the serial then has no board ID
            target = ""
        self.serial = serial or serial_for(preset, board_name, target)
        self.clock = VirtualClock()
        self.link = Link(preset, self.clock)
        self.firmware = DapFirmware(preset, board_name, store, self.serial, self.clock)
        self.unplugged = False
        self.access_denied = False
        self.claimed = False
        self._responses: Deque[bytes] = deque()  # written, not yet read by the receive thread
        self._arrivals: List[float] = []  # host arrival time of every response, in order
        self._consumed = 0  # responses whose time the host clock has taken
        self._dap_access = None  # pyOCD's DAPAccessCMSISDAP writing to us
        self._host_thread: Optional[int] = None  # the claiming thread: its clock is the host's
        self._out_done = 0.0  # when the last OUT transfer completed
        self._cond = threading.Condition()
        self.clock.add_sync(self.sync)
        self.ledger = ledger_from_env(self)
        self._watch_board = False  # ledger: a board is seated in this session
        #: CPU s per DAP packet: a float, or per phase (a host preset's, :func:`phase_cost`)
        self.host_transfer_s: Union[float, Dict[str, float]] = HOST_TRANSFER_S
        self.recording: Optional[List[Tuple[bytes, bytes]]] = None  # (OUT packet, response) pairs
        describe(self, preset, self.serial, address)

    # -- control -----------------------------------------------------------------------------
    def string_descriptor(self, index: int) -> bytes:
        """GET_DESCRIPTOR(STRING, index) (:func:`string_descriptor`)."""
        return string_descriptor(self.strings, index)

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
        self._arrivals, self._consumed, self._out_done = [], 0, 0.0
        self._dap_access = _find_dap_access()
        self._host_thread = threading.get_ident()
        if self.ledger is not None:
            self._watch_board = not self.firmware.board_gone()
            self.ledger.record("claim", self, self.firmware.generation)

    def release(self) -> None:
        """The host released the interface: save and release the board."""
        self.sync()
        if self.ledger is not None:
            self.ledger.record("release", self, self.firmware.generation)
            self._watch_board = False
        self.claimed = False
        with self._cond:
            self._responses.clear()
        self._arrivals, self._consumed, self._dap_access = [], 0, None
        self.firmware.close()

    # -- data --------------------------------------------------------------------------------
    def write_out(self, data: bytes) -> int:
        """An OUT transfer (bulk or interrupt) carrying one DAP packet, or several back to back
        on a probe whose firmware frames commands by packet (``preset.packet_framing``: each
        ``packet_size`` bytes one command, padding after it ignored); returns its length.

        The host is charged its CPU time per DAP packet (what building each one costs it,
        however they are grouped into transfers; the figure of the clock's current phase,
        :attr:`host_transfer_s`), the link one scheduling latency per transfer.
        A transfer from a thread other than the claiming one does not hold the host clock up
        (see the module docstring).

        :raises usb.core.USBError: ENODEV when unplugged (also when the probe vanishes while
            executing the packet); EPIPE (a stall) for several packets in one transfer to a
            probe that takes one command per transfer.
        """
        self.check_present()
        clock = self.clock
        if self._dap_access is None:
            self._dap_access = _find_dap_access()
        self.sync()
        if self._watch_board and self.firmware.board_gone():
            self._watch_board = False
            self.ledger.record("board_changed", self, self.firmware.generation)
        packets = self._packets(bytes(data))
        with self._cond:
            host_s = phase_cost(self.host_transfer_s, clock.phase) * len(packets)
            clock.hold("host", clock.now, host_s)
            t_built = clock.now + host_s
            t_submit = max(t_built, self._out_done)
            clock.count("usb_out")
            clock.count("bytes_out", len(data))
            arrivals = self.link.out_transfer(t_submit, [len(p) for p in packets])
            self._out_done = arrivals[-1]
            blocking = self._host_thread in (None, threading.get_ident())
            if blocking:
                clock.count("packets_waited", len(packets))  # the host waited for their transfer
            clock.charge("usb_out", (arrivals[-1] - t_submit) if blocking else 0.0)
            try:
                for packet, t_arrive in zip(packets, arrivals):
                    response, t_ready = self.firmware.execute(packet, t_arrive)
                    self._respond(packet, response, t_ready)
            except Unplugged:
                pass
            else:
                clock.advance_to(arrivals[-1] if blocking else t_built)
                self._cond.notify_all()
                return len(data)
        self.unplug()
        self.check_present()
        return 0

    def _packets(self, data: bytes) -> List[bytes]:
        size = self.preset.packet_size
        if len(data) <= size or self.preset.cmsis_dap_version == 1:
            return [data]
        if not self.preset.packet_framing:
            import usb.core

            raise usb.core.USBError(
                "Pipe error: %s firmware takes one DAP command per transfer "
                "(%d bytes sent, DAP packet size %d)" % (self.preset.name, len(data), size),
                -9,
                errno.EPIPE,
            )
        return [data[i : i + size] for i in range(0, len(data), size)]

    def _respond(self, packet: bytes, response: bytes, t_ready: float) -> None:
        """Queue ``response`` to ``packet``, ready on the probe at ``t_ready`` (caller holds
        ``_cond``)."""
        clock = self.clock
        if self.preset.cmsis_dap_version == 1:
            response = response.ljust(self.preset.max_packet, b"\0")
        t_host = self.link.inn(t_ready, len(response))
        clock.charge("usb_in", t_host - t_ready)
        self._responses.append(response)
        self._arrivals.append(t_host)
        clock.count("usb_in")
        clock.count("bytes_in", len(response))
        if self.recording is not None:
            self.recording.append((packet, bytes(response)))

    def read_in(self, size: int, timeout_ms: int) -> bytes:
        """An IN transfer: the oldest response not read yet (at once; its time is taken by
        :meth:`sync` when the host consumes it). A read with nothing to read times out after
        ``timeout_ms`` (pyOCD drains the endpoint that way when opening).

        :raises usb.core.USBError: ETIMEDOUT, or ENODEV when unplugged.
        """
        import usb.core

        deadline = time.monotonic() + max(timeout_ms, 1) / 1000.0
        with self._cond:
            while True:
                self.check_present()
                if self._responses:
                    return self._responses.popleft()[:size]
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise usb.core.USBError("Operation timed out", -7, errno.ETIMEDOUT)
                self._cond.wait(remaining)

    def sync(self) -> None:
        """Advance the host clock over the responses the host has consumed since the last call
        (see the module docstring). Called before each OUT transfer, on release, and by
        :meth:`VirtualClock.snapshot` / :meth:`VirtualClock.set_phase`."""
        written = len(self._arrivals)
        outstanding = 0
        taken = None
        if self._dap_access is not None:
            pending = getattr(self._dap_access, "_commands_to_read", None)
            outstanding = len(pending) if pending is not None else 0
            # An interface that holds packets back before the USB write counts the responses it
            # handed to pyOCD (``responses_taken``): pyOCD's pending list also holds packets that
            # are not on the bus yet, so it cannot tell how many responses were consumed.
            taken = getattr(getattr(self._dap_access, "_interface", None), "responses_taken", None)
        if taken is not None:
            consumed = max(self._consumed, min(written, taken))
        else:
            consumed = max(self._consumed, written - outstanding)
        # Responses consumed since the last sync are charged at the phase they were consumed in:
        # the clock syncs before its phase changes (VirtualClock.set_phase).
        host_s = phase_cost(self.host_transfer_s, self.clock.phase)
        for t_host in self._arrivals[self._consumed : consumed]:
            # The host handles a completion once it has it and has finished what it was doing
            # (one interpreter lock): host times add up, max(now, arrival) + host time.
            self.clock.hold("host", max(self.clock.now, t_host), host_s)
            self.clock.advance_to(max(self.clock.now, t_host) + host_s)
        self._consumed = consumed


def _find_dap_access():
    """pyOCD's ``DAPAccessCMSISDAP`` that is opening or writing to the device (read-only look at
    the calling thread's stack), or None."""
    frame = sys._getframe(1)
    for _ in range(24):
        if frame is None:
            return None
        if frame.f_code.co_filename.endswith(_DAP_ACCESS_FILE) and "self" in frame.f_locals:
            owner = frame.f_locals["self"]
            if hasattr(owner, "_commands_to_read"):
                return owner
        frame = frame.f_back
    return None
