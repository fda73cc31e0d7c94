"""piflash's own CMSIS-DAP encoding for the DAP transfers: the bytes of a flash cross the host lean.

pyOCD's ``DAPAccessCMSISDAP`` (pyocd/probe/pydapaccess/dap_access_cmsis_dap.py) builds every DAP
packet through a ``_Command`` object per packet and a ``_Transfer`` object per request, packs each
32-bit word with four shifts and masks, hands every packet to a receive thread and waits for it on
a queue (``PyUSBv2.rx_task``/``read``). On the Raspberry Pi Zero 2W that CPU, not the probe or the
wire, sets the pace of a flash (issue 42: about 4,988 packets x 2 x 312 us of the Debug Probe's
3.32 s on an nRF52840).

:class:`LeanLink` is ``DAPAccessCMSISDAP`` with the four calls that carry DAP transfers replaced
(``write_reg``, ``read_reg``, ``reg_write_repeat``, ``reg_read_repeat``, with ``flush``):

* requests go into one ``bytearray`` per DAP packet; runs of one register (a MEM-AP's DRW) become
  ``DAP_TransferBlock`` packets whose words are packed by ``struct`` from the caller's sequence
  (CMSIS-DAP command reference: ``DAP_Transfer`` 0x05 ``[0x05, index, count, (request, [word])...]``,
  response ``[0x05, count, ack, words...]``; ``DAP_TransferBlock`` 0x06 ``[0x06, index, count16,
  request, words...]``, response ``[0x06, count16, ack, words...]``);
* responses are read from the IN endpoint by the thread that needs them (no receive-thread
  hand-off) and their words unpacked by ``struct.unpack_from`` straight from pyusb's buffer;
* several packets are written in one USB transfer to probes whose firmware frames commands by
  packet (:func:`piflash.probe.batched_dap.frames_by_packet`), at most half the probe's packet
  count at once, and never more packets in flight than the probe's packet count.

pyOCD stays in charge of everything above the link: the DP and AP set-up, SELECT and CSW, the core,
the flash algorithm, the error handling of the DP (sticky errors); the errors raised are pyOCD's
own (``DAPAccessIntf.TransferFaultError`` and so on, with pyOCD's messages), so ``CMSISDAPProbe``
converts them as it does its own. The other DAP commands (DAP_Info, DAP_Connect, DAP_SWJ_Clock,
DAP_SWJ_Sequence...) go through pyOCD's protocol code unchanged, after the queued transfers.

This builds on pyOCD's pydapaccess internals (``DAPAccessCMSISDAP`` and its interface's
``ep_out``/``ep_in``/``packet_size``/``get_packet_count``), not on a public extension point: the
only public one, a probe's accelerated memory interface (``DebugProbe.get_memory_interface_for_ap``,
pyocd/coresight/ap.py), would write SELECT, CSW and TAR behind pyOCD's DP and AP caches. pyproject
pins pyOCD to the minor version this was written against, and tests/unit/test_lean_dap_compat.py fails
on a pyOCD whose internals differ.

:func:`lean_poll` is the flash loop's own poll (piflash/flashing/multipage.py): one prebuilt
``DAP_Transfer`` packet per poll, its response unpacked in one call.

Off with ``PIFLASH_DAP_LEAN=0``: pyOCD's own link (and piflash's batching interface,
piflash/probe/batched_dap.py) carries everything, as before.
"""

from __future__ import annotations

import collections
import errno
import functools
import logging
import struct
from typing import TYPE_CHECKING, Any, Callable, Deque, Dict, List, Optional, Sequence, Tuple, Type

from piflash import settings

if TYPE_CHECKING:
    from pyocd.core.session import Session
    from pyocd.probe.debug_probe import DebugProbe
    from pyocd.probe.pydapaccess.dap_access_cmsis_dap import DAPAccessCMSISDAP

LOG = logging.getLogger(__name__)

__all__ = [
    "LEAN_ENV",
    "lean_enabled",
    "lean_probe",
    "lean_link",
    "encode_transfer",
    "lean_poll",
    "PYOCD_SERIES",
]

#: Environment variable: ``0`` turns the lean path off.
LEAN_ENV = settings.PIFLASH_DAP_LEAN.name
#: The pyOCD minor series whose internals :class:`LeanLink` was written against (pyproject pins it).
PYOCD_SERIES = (0, 46)

#: CMSIS-DAP command IDs (CMSIS-DAP command reference: DAP_Transfer, DAP_TransferBlock).
DAP_TRANSFER = 0x05
DAP_TRANSFER_BLOCK = 0x06
#: Transfer request bits (CMSIS-DAP DAP_Transfer "Transfer Request"): APnDP, RnW, A[3:2].
REQ_AP = 0x01
REQ_READ = 0x02
#: Transfer response ACK values (bits 2:0) and the SWD protocol error bit (bit 3).
ACK_OK, ACK_WAIT, ACK_FAULT, ACK_NO_ACK = 1, 2, 4, 7
PROTOCOL_ERROR = 0x08


def lean_enabled() -> bool:
    """False when ``$PIFLASH_DAP_LEAN`` is ``0`` (or ``no``/``off``/``false``)."""
    return bool(settings.PIFLASH_DAP_LEAN.value())


def request_byte(reg_value: int, read: bool) -> int:
    """The DAP transfer request byte of pyOCD register ID ``reg_value`` (``DAPAccessIntf.REG``:
    0-3 DP 0x0-0xC, 4-7 AP 0x0-0xC), as pyOCD's ``write_reg``/``read_reg`` build it."""
    return (REQ_AP if reg_value >= 4 else 0) | (REQ_READ if read else 0) | ((reg_value % 4) << 2)


def encode_transfer(requests: Sequence[Tuple[int, Optional[int]]], dap_index: int = 0) -> bytes:
    """One ``DAP_Transfer`` packet: ``requests`` are ``(request byte, value)`` pairs, value None for
    a read. :raises ValueError: More than 255 transfers."""
    if len(requests) > 255:
        raise ValueError("a DAP_Transfer carries at most 255 transfers")
    out = bytearray((DAP_TRANSFER, dap_index, len(requests)))
    for req, value in requests:
        out.append(req)
        if value is not None:
            out += struct.pack("<I", value)
    return bytes(out)


#: The read requests of one DAP packet: (result, words of it in this packet) in request order.
_Reads = List[Tuple["_Result", int]]
#: A packet sent or held: (command ID, transfer count, its reads).
_Packet = Tuple[int, int, _Reads]


class _Result:
    """The words of one read request (``want`` of them), filled as responses are read.

    ``words`` (list of int), ``error`` (the exception that ended the transfers, or None).
    """

    __slots__ = ("want", "words", "error", "link")

    def __init__(self, link: Any, want: int) -> None:
        self.link, self.want = link, want
        self.words: List[int] = []
        self.error: Optional[Exception] = None

    def get(self) -> List[int]:
        """The words, reading responses until they are all in.

        :raises DAPAccessIntf.Error: The transfer failed (pyOCD's own errors)."""
        link = self.link
        with link._lock:
            while len(self.words) < self.want and self.error is None:
                link._need_response()
        if len(self.words) < self.want:
            raise self.error  # type: ignore[misc]
        return self.words


@functools.lru_cache(maxsize=None)
def _link_class() -> Type[DAPAccessCMSISDAP]:
    """:class:`LeanLink`, defined on first use (pyOCD is imported lazily)."""
    from pyocd.probe.pydapaccess.dap_access_api import DAPAccessIntf
    from pyocd.probe.pydapaccess.dap_access_cmsis_dap import DAPAccessCMSISDAP

    transfer_fault = DAPAccessIntf.TransferFaultError
    transfer_timeout = DAPAccessIntf.TransferTimeoutError
    transfer_error = DAPAccessIntf.TransferError

    def ack_error(ack: int) -> Exception:
        """The exception for a transfer response byte ``ack`` whose ACK is not OK (or whose
        protocol error bit is set), with the messages of pyOCD's ``_Command._check_response``."""
        ack_bits = ack & 0x07
        if ack_bits == ACK_FAULT:
            return transfer_fault("SWD/JTAG communication failure (FAULT ACK)")
        if ack_bits == ACK_WAIT:
            return transfer_timeout("SWD/JTAG communication failure (WAIT ACK)")
        if ack_bits == ACK_NO_ACK:
            return transfer_error("SWD/JTAG communication failure (No ACK); check USB cable, reduce debugger clock")
        if ack_bits != ACK_OK:
            return transfer_error(
                "SWD/JTAG communication failure (Unexpected ACK '%d'); check USB cable, reduce debugger clock"
                % ack_bits
            )
        return DAPAccessIntf.TransferProtocolError("SWD protocol error")

    class LeanLink(DAPAccessCMSISDAP):
        """pyOCD's CMSIS-DAP link with piflash's encoding of DAP transfers (module docstring).

        :param unique_id: The probe's unique ID (str). :param interface: pyOCD's pyusb interface
            of the probe (``PyUSBv2`` or ``PyUSB``, not opened), which has ``ep_out``/``ep_in``.
        :param framing: The probe's firmware executes each DAP-packet-sized part of an OUT
            transfer as one command (several packets per transfer).

        State: ``_commands_to_read`` (deque of packets sent whose responses are not read yet: each
        ``(command, transfers, [(result, words)...])``, the name and meaning pyOCD gives it, which
        the simulated USB probe reads to know what the host consumed), ``_held`` (packets built,
        not sent), the packet being built (``_cmd``: bytearray, ``_cmd_kind``, ``_cmd_count``,
        ``_cmd_reads``, ``_cmd_rx``: response bytes it will need).
        """

        def __init__(self, unique_id: str, interface: Any, framing: bool) -> None:
            super().__init__(unique_id, interface=interface)  # type: ignore[no-untyped-call]
            self._framing = framing
            self._reset_lean()

        # -- state ---------------------------------------------------------------------------
        def _reset_lean(self) -> None:
            self._held: List[Tuple[bytes, _Packet]] = []
            self._commands_to_read: Deque[_Packet] = collections.deque()
            self._cmd: Optional[bytearray] = None
            self._cmd_kind = 0
            self._cmd_count = 0
            self._cmd_reads: _Reads = []
            self._cmd_rx = 0

        def _init_deferred_buffers(self) -> None:
            super()._init_deferred_buffers()  # type: ignore[no-untyped-call]
            self._reset_lean()

        @property
        def _size(self) -> int:
            return self._packet_size or 64

        def _batch_limit(self) -> int:
            return max(1, (self._packet_count or 1) // 2) if self._framing else 1

        # -- building packets ----------------------------------------------------------------
        def _close_cmd(self) -> None:
            """Finish the packet being built: hold it, and send the held ones when a batch is
            full."""
            cmd = self._cmd
            if cmd is None:
                return
            if self._cmd_kind == DAP_TRANSFER:
                cmd[2] = self._cmd_count
            self._held.append((bytes(cmd), (self._cmd_kind, self._cmd_count, self._cmd_reads)))
            self._cmd = None
            if len(self._held) >= self._batch_limit():
                self._send_held()

        def _open_transfer(self, dap_index: int) -> bytearray:
            cmd = bytearray((DAP_TRANSFER, dap_index, 0))
            self._cmd, self._cmd_kind, self._cmd_count, self._cmd_reads, self._cmd_rx = cmd, DAP_TRANSFER, 0, [], 3
            return cmd

        def _transfer_room(self, write: bool) -> int:
            """How many more single writes (``write``) or reads fit in the DAP_Transfer packet
            being built (0 if none is being built or it is a block)."""
            cmd = self._cmd
            if cmd is None or self._cmd_kind != DAP_TRANSFER:
                return 0
            size = self._size
            if write:
                room = (size - len(cmd)) // 5
            else:
                room = min(size - len(cmd), (size - self._cmd_rx) // 4)
            return max(0, min(room, 255 - self._cmd_count))

        def _single(self, request: int, value: Optional[int], dap_index: int) -> Optional[_Result]:
            if self._cmd is not None and self._transfer_room(value is not None) == 0:
                self._close_cmd()
            cmd = self._cmd if self._cmd is not None else self._open_transfer(dap_index)
            cmd.append(request)
            self._cmd_count += 1
            result = None
            if value is None:
                result = _Result(self, 1)
                self._cmd_reads.append((result, 1))
                self._cmd_rx += 4
            else:
                cmd += struct.pack("<I", value)
            return result

        def _repeat(
            self, request: int, count: int, words: Optional[Sequence[int]], dap_index: int
        ) -> Optional[_Result]:
            result = _Result(self, count) if words is None else None
            done = 0
            # First into the DAP_Transfer packet being built (after a TAR write, say), as pyOCD
            # does; then DAP_TransferBlock packets of as many words as fit.
            room = min(count, self._transfer_room(words is not None))
            if room:
                cmd = self._cmd
                assert cmd is not None
                if words is None:
                    cmd += bytes((request,)) * room
                    assert result is not None
                    self._cmd_reads.append((result, room))
                    self._cmd_rx += 4 * room
                else:
                    for value in words[:room]:
                        cmd.append(request)
                        cmd += struct.pack("<I", value)
                self._cmd_count += room
                done = room
            self._close_cmd()
            size = self._size
            per_packet = (size - 5) // 4 if words is not None else (size - 4) // 4
            while done < count:
                n = min(per_packet, count - done)
                cmd = bytearray(struct.pack("<BBHB", DAP_TRANSFER_BLOCK, dap_index, n, request))
                reads: _Reads = []
                if words is None:
                    assert result is not None
                    reads.append((result, n))
                else:
                    cmd += struct.pack("<%dI" % n, *words[done : done + n])
                self._cmd, self._cmd_kind, self._cmd_count, self._cmd_reads = cmd, DAP_TRANSFER_BLOCK, n, reads
                self._close_cmd()
                done += n
            return result

        # -- the USB side --------------------------------------------------------------------
        def _send_held(self) -> None:
            """Write the held packets: one transfer when the firmware frames by packet, else one
            each; first reading responses so that no more than the probe's packet count is in
            flight."""
            held = self._held
            if not held:
                return
            limit = self._packet_count or 1
            while self._commands_to_read and len(self._commands_to_read) + len(held) > limit:
                self._read_response()
            self._held = []
            iface = self._interface
            try:
                if self._framing and len(held) > 1:
                    size = self._size
                    data = b"".join(p.ljust(size, b"\0") for p, _ in held[:-1]) + held[-1][0]
                    self._commands_to_read.extend(rec for _, rec in held)
                    iface.lean_send(data)
                    return
                for payload, rec in held:
                    self._commands_to_read.append(rec)
                    iface.lean_send(payload)
            except Exception as exc:
                self._abort(exc, read_pending=False)
                raise

        def _read_response(self) -> None:
            """Read and decode the oldest outstanding response.

            :raises DAPAccessIntf.Error: The probe answered an error (pyOCD's exceptions), or
                the read timed out (``DeviceError``); what the USB write or read raised."""
            rec = self._commands_to_read.popleft()
            try:
                buf, n = self._interface.lean_recv()
            except Exception as exc:
                self._abort(exc, read_pending=False)
                raise
            kind, count, reads = rec
            if kind == DAP_TRANSFER:
                got_kind, got_count, ack, pos = buf[0], buf[1], buf[2], 3
            else:
                got_kind, got_count, ack, pos = buf[0], buf[1] | (buf[2] << 8), buf[3], 4
            err: Optional[Exception]
            if got_kind != kind:
                err = transfer_error("DAP_TRANSFER response error: response is for command %02x" % got_kind)
            elif ack != ACK_OK:
                err = ack_error(ack)
            elif got_count != count:
                err = transfer_error()
            else:
                err = None
            if err is not None:
                self._abort(err)
                raise err
            for result, words in reads:
                if pos + 4 * words > n:
                    err = transfer_error("short DAP response (%d bytes)" % n)
                    self._abort(err)
                    raise err
                result.words.extend(struct.unpack_from("<%dI" % words, buf, pos))
                pos += 4 * words

        def _need_response(self) -> None:
            """Make progress towards a pending read: send what is built, else read one response."""
            if self._cmd is not None:
                self._close_cmd()
            if self._held:
                self._send_held()
            if self._commands_to_read:
                self._read_response()
            else:  # nothing sent that could answer: a result that can never come
                raise transfer_error("no DAP response pending")

        def _abort(self, exc: Exception, read_pending: bool = True) -> None:
            """After a failure: fail every pending read with ``exc``, drop what was not sent and,
            for a transfer error (the probe answered), read and drop the other outstanding
            responses so the next command's response is its own (pyOCD's
            ``_abort_all_transfers``)."""
            pending = list(self._commands_to_read)
            for _payload, (_k, _c, reads) in self._held:
                pending.append((_k, _c, reads))
            pending.append((self._cmd_kind, self._cmd_count, self._cmd_reads))
            for _k, _c, reads in pending:
                for result, _ in reads:
                    if result.error is None and len(result.words) < result.want:
                        result.error = exc
            outstanding = len(self._commands_to_read)
            self._reset_lean()
            if read_pending and isinstance(exc, transfer_error):
                for _ in range(outstanding):
                    try:
                        self._interface.lean_recv()
                    except Exception:  # noqa: BLE001 - the probe is gone: the first error stands
                        break

        # -- pyOCD's link API ----------------------------------------------------------------
        def write_reg(self, reg_id: Any, value: int, dap_index: int = 0) -> None:
            """Queue a write of ``value`` to DP/AP register ``reg_id`` (``DAPAccessIntf.REG``); pyOCD's API."""
            with self._lock:
                self._single(request_byte(reg_id.value, False), value, dap_index)
                if not self._deferred_transfer:
                    self.flush()

        def read_reg(self, reg_id: Any, dap_index: int = 0, now: bool = True) -> Any:
            """Queue a read of register ``reg_id``: the value (int), or with ``now=False`` a callable giving it.

            :raises DAPAccessIntf.Error: The transfer failed."""
            with self._lock:
                result = self._single(request_byte(reg_id.value, True), None, dap_index)
                assert result is not None
                if not self._deferred_transfer:
                    self.flush()
            if now:
                return result.get()[0]
            return lambda: result.get()[0]

        def reg_write_repeat(
            self, num_repeats: int, reg_id: Any, data_array: Sequence[int], dap_index: int = 0
        ) -> None:
            """Queue ``num_repeats`` writes of ``data_array`` (ints) to one register (a MEM-AP's DRW)."""
            with self._lock:
                self._repeat(request_byte(reg_id.value, False), num_repeats, data_array, dap_index)
                if not self._deferred_transfer:
                    self.flush()

        def reg_read_repeat(self, num_repeats: int, reg_id: Any, dap_index: int = 0, now: bool = True) -> Any:
            """Queue ``num_repeats`` reads of one register: a list of ints, or with ``now=False`` a callable giving it.

            :raises DAPAccessIntf.Error: The transfer failed."""
            with self._lock:
                result = self._repeat(request_byte(reg_id.value, True), num_repeats, None, dap_index)
                assert result is not None
                if not self._deferred_transfer:
                    self.flush()
            if now:
                return result.get()
            return result.get

        def flush(self) -> None:
            """Send everything queued and read every outstanding response.

            :raises DAPAccessIntf.Error: A transfer failed."""
            with self._lock:
                self._close_cmd()
                self._send_held()
                while self._commands_to_read:
                    self._read_response()

        def identify(self, item: Any) -> Any:
            """pyOCD's DAP_Info query, after the queued transfers."""
            if item not in self._cached_info:
                self.flush()
            return super().identify(item)

        def connect(self, port: Any = DAPAccessIntf.PORT.DEFAULT) -> Any:
            """pyOCD's DAP_Connect and set-up, after the queued transfers."""
            self.flush()
            return super().connect(port)

        def get_swo_status(self) -> Any:
            """pyOCD's DAP_SWO_Status, after the queued transfers."""
            self.flush()
            return super().get_swo_status()

        def _abort_all_transfers(self, exception: Exception) -> None:
            self._abort(exception)

        # -- piflash's own poll ----------------------------------------------------------------
        def exchange(self, packet: bytes, reads: int) -> Callable[[], List[int]]:
            """Queue a prebuilt ``DAP_Transfer`` packet (:func:`encode_transfer`) carrying
            ``reads`` read requests; returns a callable giving their words (list of int).
            :raises DAPAccessIntf.Error: From the callable, as the link's own reads."""
            with self._lock:
                self._close_cmd()
                result = _Result(self, reads)
                self._held.append((packet, (DAP_TRANSFER, packet[2], [(result, reads)] if reads else [])))
                if len(self._held) >= self._batch_limit():
                    self._send_held()
            return result.get

    return LeanLink


class _LeanIO:
    """What :class:`LeanLink` needs of pyOCD's pyusb interface (``PyUSBv2`` for CMSIS-DAP v2,
    ``PyUSB`` for v1/HID), mixed into it: a transfer written and a response read by the caller's
    thread, into one buffer: no receive-thread hand-off, no writer thread, no array per response.

    One thread on purpose. A writer thread (as piflash/probe/batched_dap.py has for pyOCD's link)
    lets the host build packets while pyusb's synchronous write waits for the bus, but each
    hand-off costs more CPU than it saves on a slow host: replaying the same flash
    (``benchmarks/host_cost.py``'s replay, x86, interleaved), the RP2040's 400 KiB took 0.49 s of
    CPU with it and 0.23-0.29 s without, the nRF52840's 0.22-0.29 s against 0.14-0.15 s; on the
    Zero 2W, where the host's CPU is the bottleneck, the lower CPU wins.

    The transfers go to pyusb's backend (libusb1 on a Pi) through the device's resource
    manager (``usb.core.Device._ctx``: its ``backend`` and open ``handle``; pyusb 1.x, checked by
    tests/unit/test_lean_dap_compat.py) once the interface is claimed by pyOCD's ``open``: the
    same calls ``Device.read``/``write`` end in, without their per-call look-ups, locks and
    copies (about 30 % of the host's CPU per packet on x86). Where the device has no such
    manager, ``Device.read``/``write`` carry them.

    ``responses_taken`` (int): responses read since the interface was opened (pyOCD's own
    protocol commands' too): the simulated USB probe reads it to know what the host consumed.
    Errors: what pyusb raises (``usb.core.USBError``); a read that times out raises
    ``DAPAccessIntf.DeviceError`` as pyOCD's ``read``.
    """

    DEFAULT_USB_TIMEOUT_MS: int
    is_bulk: bool
    packet_size: int
    ep_out: Any
    ep_in: Any
    dev: Any
    intf_number: Any
    serial_number: str

    def lean_init(self) -> None:
        """Set the lean state up (called by the mixed-in class's ``__init__``)."""
        self._lean_taken = 0  # responses read since open
        self._rx_buf: Any = None
        self._rx_read: Callable[[], int] = lambda: 0
        self._tx_write: Callable[[bytes], Any] = lambda data: None

    @property
    def responses_taken(self) -> int:
        """Responses read since the interface was opened (int)."""
        return self._lean_taken

    def open(self) -> None:
        """pyOCD's open (claims the interface), then bind the lean read and write to it."""
        self._lean_taken = 0
        super().open()  # type: ignore[misc]
        self._bind(max(self.packet_size, self.ep_in.wMaxPacketSize))

    def _bind(self, size: int) -> None:
        """Bind the read (into one buffer of ``size`` bytes) and the write to the claimed device."""
        import array

        import usb.util

        buf = self._rx_buf = usb.util.create_buffer(size)
        timeout = self.DEFAULT_USB_TIMEOUT_MS
        ep_in, ep_out = self.ep_in.bEndpointAddress, self.ep_out.bEndpointAddress if self.ep_out is not None else None
        ctx = getattr(self.dev, "_ctx", None)
        backend, handle = getattr(ctx, "backend", None), getattr(ctx, "handle", None)
        if backend is not None and handle is not None:
            read = backend.bulk_read if self.is_bulk else backend.intr_read
            self._rx_read = functools.partial(read, handle, ep_in, self.intf_number, buf, timeout)
            write = backend.bulk_write if self.is_bulk else backend.intr_write
            intf = self.intf_number
            self._tx_write = lambda data: write(handle, ep_out, intf, array.array("B", data), timeout)
        else:
            self._rx_read = functools.partial(self.dev.read, ep_in, buf, timeout)
            self._tx_write = functools.partial(self.dev.write, ep_out, timeout=timeout)

    def set_packet_size(self, size: int) -> None:
        """pyOCD's; a larger DAP packet gets a larger read buffer."""
        super().set_packet_size(size)  # type: ignore[misc]
        if self._rx_buf is not None and len(self._rx_buf) < size:
            self._bind(size)

    def read(self) -> Any:
        """pyOCD's read (its protocol commands' responses), counted in ``responses_taken``."""
        data = super().read()  # type: ignore[misc]
        self._lean_taken += 1
        return data

    def lean_send(self, data: bytes) -> None:
        """Send ``data`` (one DAP packet, or several padded to the DAP packet size but the last)
        as one transfer; returns when it is written (pyusb's writes are synchronous).

        :raises usb.core.USBError: The write failed."""
        if not self.is_bulk:  # HID: every report the endpoint's size, as PyUSB.write
            if self.ep_out is not None:
                self._tx_write(data.ljust(self.ep_out.wMaxPacketSize, b"\0"))
            else:  # no interrupt OUT endpoint: HID SET_REPORT (output) on endpoint 0
                self.dev.ctrl_transfer(
                    0x21,
                    0x09,
                    0x200,
                    self.intf_number,
                    data.ljust(self.packet_size, b"\0"),
                    self.DEFAULT_USB_TIMEOUT_MS,
                )
            return
        self._tx_write(data)
        last = len(data) % self.packet_size
        if 0 < last and last % self.ep_out.wMaxPacketSize == 0:
            self._tx_write(b"")  # ZLP ends a short transfer, as pyOCD's PyUSBv2.write

    def lean_recv(self) -> Tuple[Any, int]:
        """The next response: (buffer, byte count); the buffer is reused by the next call.

        :raises DAPAccessIntf.DeviceError: Nothing came within pyOCD's USB timeout.
        :raises usb.core.USBError: The read failed."""
        import usb.core
        from pyocd.probe.pydapaccess.dap_access_api import DAPAccessIntf

        try:
            n = self._rx_read()
        except usb.core.USBError as exc:
            if exc.errno == errno.ETIMEDOUT:
                raise DAPAccessIntf.DeviceError("Timeout reading from probe %s" % self.serial_number) from None
            raise
        self._lean_taken += 1
        return self._rx_buf, n


@functools.lru_cache(maxsize=None)
def _interface_classes() -> Dict[type, type]:
    """pyOCD's pyusb interface classes -> the same with :class:`_LeanIO` mixed in."""
    from pyocd.probe.pydapaccess.interface.pyusb_backend import PyUSB
    from pyocd.probe.pydapaccess.interface.pyusb_v2_backend import PyUSBv2

    out: Dict[type, type] = {}
    for base in (PyUSBv2, PyUSB):

        def __init__(self: Any, dev: Any, _base: type = base) -> None:
            _base.__init__(self, dev)  # type: ignore[misc]
            self.lean_init()

        out[base] = type("Lean" + base.__name__, (_LeanIO, base), {"__init__": __init__})
    return out


def _lean_interface(probe: DebugProbe) -> Tuple[Any, bool]:
    """A :class:`_LeanIO` interface for ``probe`` (a ``CMSISDAPProbe`` not opened) and whether its
    firmware frames commands by packet; (None, False) when pyOCD reaches it other than through
    pyusb (hidapi on another OS)."""
    from pyocd.probe.pydapaccess.interface import pyusb_backend as v1
    from pyocd.probe.pydapaccess.interface.pyusb_v2_backend import PyUSBv2

    from piflash.probe.batched_dap import _usb_device, batching_enabled, frames_by_packet

    iface = getattr(getattr(probe, "_link", None), "_interface", None)
    classes = _interface_classes()
    if type(iface) not in classes:
        return None, False
    if type(iface) is PyUSBv2:
        dev = _usb_device(probe.unique_id)
        framing = bool(
            dev is not None
            and batching_enabled()
            and frames_by_packet(dev.idVendor, dev.idProduct, dev.product, dev.bcdDevice)
        )
    else:
        dev = v1.usb_find(custom_match=v1.FindDap(probe.unique_id))
        framing = False
    if dev is None:
        return None, False
    return classes[type(iface)](dev), framing


def lean_probe(probe: DebugProbe) -> DebugProbe:
    """``probe`` again over a :class:`LeanLink` when it is a pyusb CMSIS-DAP probe and the lean
    path is on; else ``probe`` itself (pyOCD's link, with piflash's batching where it applies,
    piflash/probe/batched_dap.py).

    :param probe: A pyOCD ``DebugProbe`` not yet opened (from ``ConnectHelper``).
    :returns: A pyOCD ``CMSISDAPProbe`` (a new one, same unique ID) or ``probe``.
    """
    from pyocd.probe.cmsis_dap_probe import CMSISDAPProbe

    from piflash.probe.batched_dap import batched_probe

    if not lean_enabled() or type(probe) is not CMSISDAPProbe:
        return batched_probe(probe)
    try:
        iface, framing = _lean_interface(probe)
        if iface is None:
            return batched_probe(probe)
        link = _link_class()(probe.unique_id, iface, framing)  # type: ignore[call-arg]
    except Exception as exc:  # descriptors unreadable: pyOCD's own link still works
        LOG.debug("not using the lean DAP path for %s: %s", probe.unique_id, exc)
        return batched_probe(probe)
    lean: DebugProbe = _probe_class()(link)
    return lean


@functools.lru_cache(maxsize=None)
def _probe_class() -> type:
    """``LeanCMSISDAPProbe``: pyOCD's ``CMSISDAPProbe`` whose ``write_ap_multiple`` and
    ``read_ap_multiple`` do not format every word as hex for a trace log that is off (pyOCD's
    ``TRACE.debug(..., ", ".join(["%#010x" % v for v in values]))`` runs its arguments whether or
    not the log is on: about 4 us per 64-byte packet on x86). Same link calls, same exceptions."""
    from pyocd.probe.cmsis_dap_probe import CMSISDAPProbe
    from pyocd.probe.pydapaccess import DAPAccess

    class LeanCMSISDAPProbe(CMSISDAPProbe):
        """pyOCD's ``CMSISDAPProbe`` without the eager trace formatting of every word (:func:`_probe_class`)."""

        def write_ap_multiple(self, addr: int, values: Any) -> None:
            """Write ``values`` (ints) to AP register ``addr`` repeatedly; pyOCD's exceptions."""
            ap_reg = self.REG_ADDR_TO_ID_MAP[self.AP, (addr & self.A32)]
            try:
                self._link.reg_write_repeat(len(values), ap_reg, values, dap_index=0)
            except DAPAccess.Error as exc:
                raise self._convert_exception(exc) from exc

        def read_ap_multiple(self, addr: int, count: int = 1, now: bool = True) -> Any:
            """Read AP register ``addr`` ``count`` times: a list of ints, or a callable giving it; pyOCD's exceptions."""
            ap_reg = self.REG_ADDR_TO_ID_MAP[self.AP, (addr & self.A32)]
            try:
                result = self._link.reg_read_repeat(count, ap_reg, dap_index=0, now=now)
            except DAPAccess.Error as exc:
                raise self._convert_exception(exc) from exc
            if now:
                return result

            def read_ap_repeat_callback() -> Any:
                """The deferred words (list of int); pyOCD's exceptions."""
                try:
                    return result()
                except DAPAccess.Error as exc:
                    raise self._convert_exception(exc) from exc

            return read_ap_repeat_callback

    return LeanCMSISDAPProbe


def lean_link(session: Session) -> Optional[Any]:
    """The :class:`LeanLink` of ``session``'s probe, or None (pyOCD's own link)."""
    link = getattr(getattr(session, "probe", None), "_link", None)
    if link is not None and type(link) is _link_class():
        return link
    return None


def lean_poll(link: Any, packet: bytes, reads: int) -> Callable[[], List[int]]:
    """Queue ``packet`` (from :func:`encode_transfer`, ``reads`` read requests) on ``link`` (from
    :func:`lean_link`); returns a callable giving the words read (list of int).

    :raises pyocd.probe.pydapaccess.dap_access_api.DAPAccessIntf.Error: From the callable."""
    get: Callable[[], List[int]] = link.exchange(packet, reads)
    return get
