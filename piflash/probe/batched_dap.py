"""Several DAP packets per USB transfer, for probe firmware that frames commands by packet.

pyOCD's CMSIS-DAP v2 interface (``PyUSBv2.write``, pyocd/probe/pydapaccess/interface/
pyusb_v2_backend.py) sends each DAP packet as its own synchronous bulk OUT transfer: the host
waits for every 64-byte packet to be scheduled, sent and acknowledged before it builds the next.
On a full-speed probe that wait, not the probe or the wire, sets the pace of a large write (about
18,000 packets per MiB with the Raspberry Pi Debug Probe's 64-byte DAP packets).

The Debug Probe's firmware since debugprobe v2.0 arms one OUT transfer of ``DAP_PACKET_SIZE``
bytes per command in a ring of ``DAP_PACKET_COUNT`` buffers and executes each buffer as one
command (raspberrypi/debugprobe ``src/tusb_edpt_handler.c``, commit 58fa7a1 "process commands on
a packet basis ... multiple commands to be framed correctly"; bcdDevice 0x0200 and later). One
host transfer of several packets, each command padded to the DAP packet size, is therefore
several commands executed in order, without a wait for each (pyOCD is about twice as slow as
OpenOCD and probe-rs on the same probe, rgrr/yapicoprobe issue #172).
Firmware that reads a byte stream instead (the Debug Probe's v1.x "picoprobe", yapicoprobe's
``DAP_GetCommandLength`` parser) would take the padding for commands, so only the firmware of
:func:`frames_by_packet` gets batches.

:class:`BatchedCmsisDapV2` sends a packet at once when the probe has nothing else to do (every
packet sent has been answered and its response read), as TCP's Nagle algorithm does, so a lone
command waits for nothing; while packets are in flight it holds the next ones back and sends up
to half the probe's packet count (4 of the Debug Probe's 8: one half executes while the other
crosses the bus) in one transfer; and it sends what it holds when pyOCD asks for a response
whose command is held back or is the last one sent (the probe would go idle after it, and the
host is about to wait anyway), so nothing waits on a packet that was never sent and pyOCD's
limit of packets in flight is kept. The rules look only at counts of packets sent and responses
taken, never at timing, so a simulated run is deterministic.

A batch sent while others are in flight goes out from a writer thread: pyusb's bulk write is
synchronous (libusb waits for the transfer's scheduling, its packets and their handshakes, with
the interpreter lock released), so from pyOCD's thread the host would build nothing while each
batch crossed the bus. A lone packet to an idle probe is still written from the caller's thread
(it waits for its response at once anyway, and a thread switch would only add to that). The
writer keeps the transfers in order; the first one that fails stops it, and its error is raised
from the host's next ``write`` or ``read``. It is pyOCD's
interface class, subclassed (an interface is what ``DAPAccessCMSISDAP`` takes as its
``interface`` argument); nothing of pyOCD is changed at run time.

Turned off with ``PIFLASH_DAP_BATCH=0`` (every packet its own transfer, as pyOCD does).
"""

from __future__ import annotations

import functools
import logging
import queue
import threading
from typing import TYPE_CHECKING, Any, Callable, List, Optional, Tuple, Type

if TYPE_CHECKING:
    from pyocd.probe.debug_probe import DebugProbe
    from pyocd.probe.pydapaccess.interface.pyusb_v2_backend import PyUSBv2

from piflash import settings

LOG = logging.getLogger(__name__)

__all__ = ["BATCH_ENV", "DEBUGPROBE_PRODUCTS", "frames_by_packet", "batching_enabled", "batched_probe"]

#: Environment variable: ``0`` turns batching off.
BATCH_ENV = settings.PIFLASH_DAP_BATCH.name
#: Product strings of debugprobe firmware builds (raspberrypi/debugprobe
#: ``include/board_debug_probe_config.h`` and ``board_pico_config.h``: PROBE_PRODUCT_STRING).
DEBUGPROBE_PRODUCTS = ("Debug Probe (CMSIS-DAP)", "Picoprobe (CMSIS-DAP)")
#: Raspberry Pi's USB vendor ID and the debugprobe product ID (``src/usb_descriptors.c``).
_DEBUGPROBE_VID_PID = (0x2E8A, 0x000C)
#: First debugprobe release with the per-packet endpoint handler (tag debugprobe-v2.0,
#: bcdDevice 0x0200 in ``src/usb_descriptors.c``).
_FIRST_FRAMED_BCD = 0x0200


def frames_by_packet(vid: int, pid: int, product: Optional[str], bcd_device: int) -> bool:
    """Whether a CMSIS-DAP v2 probe's firmware executes each DAP-packet-sized OUT transfer as one
    command (so one USB transfer may carry several, padded): debugprobe v2.0 or later.

    :param vid: / pid: USB vendor / product ID (int). :param product: iProduct string.
    :param bcd_device: bcdDevice (BCD release number; debugprobe writes its version there).
    """
    return (vid, pid) == _DEBUGPROBE_VID_PID and product in DEBUGPROBE_PRODUCTS and bcd_device >= _FIRST_FRAMED_BCD


def batching_enabled() -> bool:
    """False when ``$PIFLASH_DAP_BATCH`` is ``0`` (or ``no``/``off``/``false``)."""
    return bool(settings.PIFLASH_DAP_BATCH.value())


#: Marker the writer thread puts in the response queue when a write failed: it wakes a ``read``
#: waiting for a response that will never come.
_WRITE_FAILED = object()


class _Writer:
    """One session's writer thread: the transfers queued for it, written in order.

    :param write: Writes one transfer (bytes) to the OUT endpoint; raises what pyusb raises.
    :param responses: The session's response queue (pyOCD's ``rcv_data``), woken on a failure.
    :param name: The thread's name.

    ``lock`` is held while a transfer is on its way out (the host's own writes take it too);
    ``out_taken`` is the host's count of responses taken when the transfer being written was
    queued; ``error`` is the first write's failure (the writes queued after it are dropped:
    their commands are lost with the probe).
    """

    def __init__(self, write: Callable[[bytes], None], responses: queue.SimpleQueue[Any], name: str) -> None:
        self.write, self.responses = write, responses
        self.queue: queue.SimpleQueue[Optional[Tuple[bytes, int]]] = queue.SimpleQueue()
        self.lock = threading.Lock()
        self.out_taken = 0
        self.error: Optional[BaseException] = None
        self.closing = False
        self.thread = threading.Thread(target=self._run, daemon=True, name=name)
        self.thread.start()

    def put(self, payload: bytes, taken: int) -> None:
        self.queue.put((payload, taken))

    def stop(self, timeout: float) -> None:
        """Drop what is still queued, let the transfer under way finish (each write is bounded
        by its USB timeout) and wait for the thread, at most ``timeout`` seconds."""
        self.closing = True
        self.queue.put(None)
        self.thread.join(timeout)

    def _run(self) -> None:
        while True:
            item = self.queue.get()
            if item is None:
                return
            if self.error is not None or self.closing:
                continue
            payload, self.out_taken = item
            with self.lock:
                try:
                    self.write(payload)
                except Exception as exc:  # noqa: BLE001 - raised in the host's thread
                    self.error = exc
                    self.responses.put(_WRITE_FAILED)


@functools.lru_cache(maxsize=None)
def _interface_class() -> Type[PyUSBv2]:
    """:class:`BatchedCmsisDapV2`, defined on first use (pyOCD is imported lazily)."""
    from pyocd.probe.pydapaccess.dap_access_api import DAPAccessIntf
    from pyocd.probe.pydapaccess.interface.pyusb_v2_backend import PyUSBv2

    class BatchedCmsisDapV2(PyUSBv2):
        """pyOCD's CMSIS-DAP v2 pyusb interface, sending held-back DAP packets together from a
        writer thread.

        ``responses_taken`` (int): responses handed to pyOCD since the interface was opened; read
        in the writer thread while it writes a batch, the count when that batch was queued.
        Errors: a failed USB write raises its ``usb.core.USBError`` from the next ``write`` or
        ``read`` (a ``read`` waiting for a response is woken at once), which pyOCD's
        ``DAPAccessCMSISDAP`` turns into aborted transfers and a ``DAPAccessIntf`` error as it
        does for its own writes; a response that does not come within pyOCD's USB timeout
        (``DEFAULT_USB_TIMEOUT_S``) raises ``DAPAccessIntf.DeviceError``, as pyOCD's ``read``.
        ``close`` waits for a transfer under way (at most two USB timeouts: the transfer and its
        zero-length packet) before it releases the device.
        """

        def __init__(self, dev: Any) -> None:  # dev: a pyusb usb.core.Device
            super().__init__(dev)  # type: ignore[no-untyped-call]
            self._held: List[bytes] = []
            self._sent = 0  # packets sent or queued for the writer since open
            self._taken = 0  # responses handed to pyOCD since open
            self._writer: Optional[_Writer] = None

        @property
        def responses_taken(self) -> int:
            writer = self._writer
            if writer is not None and threading.current_thread() is writer.thread:
                return writer.out_taken
            return self._taken

        def open(self) -> None:
            self._held, self._sent, self._taken = [], 0, 0
            super().open()  # type: ignore[no-untyped-call]
            self._writer = _Writer(self._write_transfer, self.rcv_data, "piflash DAP writer (%s)" % self.serial_number)

        def _batch_limit(self) -> int:
            # Half the probe's buffers: one half executes while the other crosses the bus, so
            # the probe never waits for a batch being collected (a full batch would leave it
            # idle from its last response to the next batch's arrival).
            return max(1, (self.packet_count or 1) // 2)

        def write(self, data: bytes) -> None:
            """Send one DAP packet at once when the probe has nothing else to do (every packet
            sent has been answered and read), else hold it back until a batch is full."""
            self._raise_write_error()
            self._held.append(bytes(data))
            if self._sent == self._taken or len(self._held) >= self._batch_limit():
                self._send_held()

        def read(self) -> Any:
            """The next response. Held packets are sent first when its command is one of them,
            or is the last one sent: the probe would be idle once it has answered, and the host
            is about to wait anyway."""
            if self.closed:
                return b""
            if self._held and self._taken >= self._sent - 1:
                self._send_held()
            self._raise_write_error()
            if self._read_thread_did_exit:
                raise DAPAccessIntf.DeviceError(
                    "Probe %s read thread exited unexpectedly" % self.serial_number
                ) from self._read_thread_exception
            try:
                data = self.rcv_data.get(True, self.DEFAULT_USB_TIMEOUT_S)
            except queue.Empty:
                raise DAPAccessIntf.DeviceError("Timeout reading from probe %s" % self.serial_number) from None
            if data is _WRITE_FAILED:
                self._raise_write_error()
                raise DAPAccessIntf.DeviceError("Probe %s: a write failed" % self.serial_number)
            self._taken += 1
            return data

        def close(self) -> None:
            self._held = []
            if self._writer is not None:
                self._writer.stop(2 * self.DEFAULT_USB_TIMEOUT_S + 1.0)
                self._writer = None
            super().close()  # type: ignore[no-untyped-call]

        def _raise_write_error(self) -> None:
            writer = self._writer
            if writer is not None and writer.error is not None:
                raise writer.error

        def _send_held(self) -> None:
            """Send the held packets as one transfer: from this thread when the probe is idle
            (nothing queued, a lone command waits for no thread switch), else through the
            writer thread, so the host builds the next packets while this transfer crosses."""
            held, self._held = self._held, []
            size = self.packet_size
            # Every packet but the last padded to the DAP packet size: the firmware's transfer of
            # that size completes on it; the last may be short, which ends the transfer.
            payload = b"".join(p.ljust(size, b"\0") for p in held[:-1]) + held[-1]
            for _ in held:
                self.read_sem.release()  # one IN read per command (pyOCD's rx thread)
            writer = self._writer
            assert writer is not None, "open() starts the writer"
            if self._sent == self._taken:
                # Every packet sent was answered: the writer has written all it was given (it
                # may still be leaving its lock).
                with writer.lock:
                    self._write_transfer(payload)
            else:
                writer.put(payload, self._taken)
            self._sent += len(held)

        def _write_transfer(self, payload: bytes) -> None:
            self.ep_out.write(payload, timeout=self.DEFAULT_USB_TIMEOUT_MS)
            last = len(payload) % self.packet_size
            if 0 < last and last % self.ep_out.wMaxPacketSize == 0:
                self.ep_out.write(b"", timeout=self.DEFAULT_USB_TIMEOUT_MS)  # ZLP, as pyOCD

    return BatchedCmsisDapV2


def _usb_device(serial: str) -> Any:
    """The pyusb device of the CMSIS-DAP v2 probe with this serial number, or None."""
    from pyocd.probe.pydapaccess.interface import pyusb_v2_backend as v2

    if not v2.IS_AVAILABLE:
        return None
    return v2.usb_find(custom_match=v2.HasCmsisDapv2Interface(serial))


def batched_probe(probe: DebugProbe) -> DebugProbe:
    """``probe`` again, over :class:`BatchedCmsisDapV2`, when it is a USB CMSIS-DAP v2 probe whose
    firmware :func:`frames_by_packet` and batching is on; else ``probe`` itself.

    :param probe: A pyOCD ``DebugProbe`` not yet opened (from ``ConnectHelper``).
    :returns: A pyOCD ``CMSISDAPProbe`` (a new one, same unique ID) or ``probe``.
    """
    from pyocd.probe.cmsis_dap_probe import CMSISDAPProbe

    if not batching_enabled() or type(probe) is not CMSISDAPProbe:
        return probe
    try:
        dev = _usb_device(probe.unique_id)
        if dev is None or not frames_by_packet(dev.idVendor, dev.idProduct, dev.product, dev.bcdDevice):
            return probe
        from pyocd.probe.pydapaccess.dap_access_cmsis_dap import DAPAccessCMSISDAP

        link = DAPAccessCMSISDAP(probe.unique_id, interface=_interface_class()(dev))
    except Exception as exc:  # descriptors unreadable: pyOCD's own interface still works
        LOG.debug("not batching DAP packets for %s: %s", probe.unique_id, exc)
        return probe
    return CMSISDAPProbe(link)
