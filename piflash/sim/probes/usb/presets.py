"""Named simulated USB CMSIS-DAP probes: USB identity, DAP capabilities and link timing.

A preset is what a real probe model fixes: its USB descriptors (VID:PID, strings, class,
endpoints), what its firmware reports through DAP_Info (packet size and count), which USB link it
uses and how long its firmware takes per command. The VID:PIDs are in piflash's probe table
(``piflash/probe/probetable.py``; a test keeps the two in step) and in pyOCD's
``probe/pydapaccess/interface/common.py``.

Timing parameters are the model's assumptions; each names its source or says that it is a fitted
value (fitted against the published measurements listed in ``docs/benchmarks.md``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Tuple

__all__ = ["ProbePreset", "PRESETS", "LINK_KINDS", "get_preset"]

#: Link kinds: CMSIS-DAP v1 over HID interrupt endpoints at full speed, CMSIS-DAP v2 over vendor
#: bulk endpoints at full speed (12 Mbit/s) or high speed (480 Mbit/s).
LINK_KINDS: Tuple[str, ...] = ("v1-hid", "v2-bulk-fs", "v2-bulk-hs")


@dataclass(frozen=True)
class ProbePreset:
    """One simulated probe model.

    :param name: Preset key (``debugprobe``, ``yapicoprobe``, ``yapicoprobe-v1``, ``daplink``,
        ``mculink``).
    :param vid: / pid: USB vendor and product ID (int).
    :param manufacturer: / product: USB string descriptors; ``interface`` is the CMSIS-DAP
        interface string (pyOCD requires "CMSIS-DAP" in it for v2, and for v1 when there are
        several HID interfaces).
    :param link: One of :data:`LINK_KINDS`.
    :param packet_size: DAP_Info 0xFF, bytes per DAP packet; :param packet_count: DAP_Info 0xFE.
    :param firmware_version: DAP_Info 0x09 (product firmware version string).
    :param protocol_version: DAP_Info 0x04 (CMSIS-DAP protocol version string).
    :param max_swd_hz: Highest SWCLK the probe reaches, Hz (a faster DAP_SWJ_Clock is capped).
    :param cmd_overhead_s: Probe firmware time per DAP command (parse, dispatch), seconds.
    :param transfer_overhead_s: Firmware time per SWD transfer on top of its bits, seconds (the
        reference CMSIS-DAP code bit-bangs each transfer in software).
    :param serial_digits: Length of the hex serial number (the pyOCD unique ID).
    :param bcd_device: Device release number in the device descriptor (BCD).
    :param packet_framing: The firmware arms one OUT transfer of ``packet_size`` bytes per DAP
        command, so one host transfer of several packets is several commands (each padded to
        ``packet_size`` but the last); False: the firmware takes one command per transfer.
    :param pio_clock_hz: The debugprobe firmware's system clock, Hz, when SWCLK comes from it
        through an integer PIO divider (:meth:`swclk_hz`); None: the probe runs any requested
        SWCLK up to ``max_swd_hz`` as asked (an assumption where the firmware is not known).
    """

    name: str
    vid: int
    pid: int
    manufacturer: str
    product: str
    interface: str
    link: str
    packet_size: int
    packet_count: int
    firmware_version: str
    protocol_version: str
    max_swd_hz: float
    cmd_overhead_s: float
    transfer_overhead_s: float
    serial_digits: int
    bcd_device: int
    packet_framing: bool = False
    pio_clock_hz: Optional[float] = None

    def swclk_hz(self, requested_hz: int) -> float:
        """The SWCLK, Hz, this probe runs for a DAP_SWJ_Clock request of ``requested_hz`` (> 0).

        With :attr:`pio_clock_hz` set, debugprobe's three steps (raspberrypi/debugprobe v2.3.1;
        the rounding up since v2.2.3, commit aa17d6d): CMSIS-DAP's ``DAP_SWJ_Clock`` turns the
        request into a delay, ``ceil((clk_sys / 2) / request) - IO_PORT_WRITE_CYCLES`` (1, at
        least 1; ``CMSIS_DAP/.../DAP.c``, ``include/DAP_config.h``), ``src/sw_dp_pio.c``'s
        ``MAKE_KHZ`` turns that back into ``clk_sys / (2000 x (delay + 1))`` kHz, and
        ``src/probe.c``'s ``probe_set_swclk_freq`` sets the PIO's integer divider
        ``(ceil(clk_sys_kHz / kHz) + 3) // 4`` (1-65535); SWCLK is clk_sys / (4 x divider), four
        PIO cycles per bit (``src/probe.pio``). At clk_sys 125 MHz: 4 MHz -> 3.47 MHz, 10 MHz ->
        7.81, 25 MHz -> 15.6, 31.25 MHz and more -> 31.25 (the cap, clk_sys / 4). Below about
        1 kHz ``MAKE_KHZ`` gives 0 and the firmware divides by it; the model runs the slowest
        divider there (477 Hz), what no debugger asks for (pyOCD's and piflash's lowest is 1 kHz).
        """
        if self.pio_clock_hz is None:
            return float(min(requested_hz, self.max_swd_hz))
        clk = int(self.pio_clock_hz)
        if requested_hz >= clk // 2:  # MAX_SWJ_CLOCK(DELAY_FAST_CYCLES 0): the fast path
            delay = 1
        else:
            delay = max(1, ((clk // 2) + requested_hz - 1) // requested_hz - 1)
        khz = clk // (2000 * (delay + 1))
        clk_khz = clk // 1000
        divider = 65535 if khz == 0 else min(65535, max(1, ((clk_khz + khz - 1) // khz + 3) // 4))
        return clk / (4 * divider)

    @property
    def cmsis_dap_version(self) -> int:
        """1 (HID reports) or 2 (bulk endpoints)."""
        return 1 if self.link == "v1-hid" else 2

    @property
    def high_speed(self) -> bool:
        """Whether the device runs at USB high speed (480 Mbit/s)."""
        return self.link == "v2-bulk-hs"

    @property
    def max_packet(self) -> int:
        """wMaxPacketSize of the data endpoints: 64 bytes at full speed, 512 for high-speed bulk
        (USB 2.0 specification sections 5.7.3 and 5.8.3)."""
        return 512 if self.high_speed else 64


PRESETS: Dict[str, ProbePreset] = {
    # Raspberry Pi Debug Probe (RP2040, debugprobe firmware): CMSIS-DAP v2 bulk, full speed.
    # raspberrypi/debugprobe v2.3.1: src/usb_descriptors.c (2e8a:000c, "Raspberry Pi",
    # PROBE_PRODUCT_STRING "Debug Probe (CMSIS-DAP)" from include/board_debug_probe_config.h,
    # interface "CMSIS-DAP v2 Interface", bcdDevice 0x0231) and include/DAP_config.h
    # (DAP_PACKET_SIZE 64, DAP_PACKET_COUNT 8, no product firmware version string). The RP2040's
    # PIO clocks SWD from clk_sys, pico-sdk's default 125 MHz (the firmware sets no other), by
    # an integer divider: 31.25 MHz at most (ProbePreset.swclk_hz; a maintainer in
    # raspberrypi/debugprobe PR #54: "max speed is implicitly capped at 31.25Mhz").
    # src/tusb_edpt_handler.c (since v2.0, commit 58fa7a1) arms one 64-byte OUT transfer per
    # command: packet framing.
    "debugprobe": ProbePreset(
        name="debugprobe",
        vid=0x2E8A,
        pid=0x000C,
        manufacturer="Raspberry Pi",
        product="Debug Probe (CMSIS-DAP)",
        interface="CMSIS-DAP v2 Interface",
        link="v2-bulk-fs",
        packet_size=64,
        packet_count=8,
        firmware_version="",
        protocol_version="2.1.0",
        max_swd_hz=31_250_000.0,
        cmd_overhead_s=20e-6,
        transfer_overhead_s=1.0e-6,
        serial_digits=16,
        bcd_device=0x0231,
        packet_framing=True,
        pio_clock_hz=125e6,
    ),
    # YAPicoprobe (rgrr/yapicoprobe) at commit 28fd8db (2023-01-06), the firmware of the
    # published RP2040 figures in its doc/benchmarks.adoc: the same 2e8a:000c, product
    # "YAPicoprobe CMSIS-DAP", CMSIS-DAP v2 interface "YAPicoprobe CMSIS-DAP v2"
    # (src/usb_descriptors.c); on DAPv2 2 packets of min(CFG_TUD_VENDOR_RX_BUFSIZE 1024, 128) =
    # 128 bytes ("pyocd does not like packets > 128", src/main.c), on DAPv1 (HID) 1 packet of
    # 64 bytes; SWD "overclocked to 25MHz", the RP2040 at 150 MHz (commit message). Firmware
    # times per command and transfer: the Debug Probe's (an assumption).
    "yapicoprobe": ProbePreset(
        name="yapicoprobe",
        vid=0x2E8A,
        pid=0x000C,
        manufacturer="Raspberry Pi",
        product="YAPicoprobe CMSIS-DAP",
        interface="YAPicoprobe CMSIS-DAP v2",
        link="v2-bulk-fs",
        packet_size=128,
        packet_count=2,
        firmware_version="",
        protocol_version="2.1.0",
        max_swd_hz=25_000_000.0,
        cmd_overhead_s=20e-6,
        transfer_overhead_s=1.0e-6,
        serial_digits=16,
        bcd_device=0x0110,
    ),
    "yapicoprobe-v1": ProbePreset(
        name="yapicoprobe-v1",
        vid=0x2E8A,
        pid=0x000C,
        manufacturer="Raspberry Pi",
        product="YAPicoprobe CMSIS-DAP",
        interface="YAPicoprobe CMSIS-DAP v1",
        link="v1-hid",
        packet_size=64,
        packet_count=1,
        firmware_version="",
        protocol_version="2.1.0",
        max_swd_hz=25_000_000.0,
        cmd_overhead_s=20e-6,
        transfer_overhead_s=1.0e-6,
        serial_digits=16,
        bcd_device=0x0110,
    ),
    # Arm DAPLink on the micro:bit v1 interface chip (KL26Z): CMSIS-DAP v1 over HID, 64-byte
    # reports, full speed, 1 ms interrupt polling (bInterval 1). 0d28:0204, product "DAPLink
    # CMSIS-DAP"; DAP_PACKET_SIZE 64 and DAP_PACKET_COUNT 5 (ARMmbed/DAPLink
    # source/hic_hal/freescale/kl26z/DAP_config.h). Software SWD tops out at about 2 MHz on these
    # interface chips (ARMmbed/DAPLink issue #627, maintainer's comment). Serial: 48 hex digits.
    "daplink": ProbePreset(
        name="daplink",
        vid=0x0D28,
        pid=0x0204,
        manufacturer="ARM",
        product="DAPLink CMSIS-DAP",
        interface="CMSIS-DAP v1",
        link="v1-hid",
        packet_size=64,
        packet_count=5,
        firmware_version="0257",
        protocol_version="1.3.0",
        max_swd_hz=2_000_000.0,
        cmd_overhead_s=30e-6,
        transfer_overhead_s=3.0e-6,
        serial_digits=48,
        bcd_device=0x1000,
    ),
    # A high-speed CMSIS-DAP v2 probe, NXP MCU-Link (1fc9:0143, LPC55S69 with a USB HS PHY):
    # 512-byte packets (USB 2.0 high-speed bulk wMaxPacketSize). Its firmware is closed: packet
    # count 8, the strings and the firmware timing are assumptions of this model.
    "mculink": ProbePreset(
        name="mculink",
        vid=0x1FC9,
        pid=0x0143,
        manufacturer="NXP Semiconductors",
        product="MCU-LINK (r0FF) CMSIS-DAP V3.128",
        interface="MCU-LINK CMSIS-DAP",
        link="v2-bulk-hs",
        packet_size=512,
        packet_count=8,
        firmware_version="3.128",
        protocol_version="2.1.0",
        max_swd_hz=24_000_000.0,
        cmd_overhead_s=10e-6,
        transfer_overhead_s=0.3e-6,
        serial_digits=16,
        bcd_device=0x0100,
    ),
}


def get_preset(name: str) -> ProbePreset:
    """The preset called ``name``.

    :raises ValueError: Unknown preset.
    """
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError("unknown simulated probe preset %r (choose from %s)" % (name, ", ".join(PRESETS))) from None
