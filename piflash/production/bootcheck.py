"""The boot check: after the flash and the reset, prove that the new firmware starts.

A verified flash proves the bytes, not the board (a wrong clock setting, a missing bootloader or
a bad joint gives a board that verifies and never runs). The check waits, with a timeout in
seconds, for one of three signs of life (docs/boot-check.md):

``rtt:REGEX``
    text on SEGGER RTT up-channel 0 that matches the regular expression (Python ``re`` syntax,
    searched in the last :data:`~piflash.limits.BOOT_TEXT_WINDOW` characters read, in a child
    process that is ended after :data:`~piflash.limits.PATTERN_SEARCH_MAX_S` seconds of one
    search: :mod:`piflash.production.textsearch`). The control block is found at the ELF symbol
    ``_SEGGER_RTT`` when the firmware is an ELF that has it, else by scanning the target's
    default RAM region for the ID ``"SEGGER RTT"`` (pyOCD's ``pyocd.debug.rtt``
    ``GenericRTTControlBlock``, its public RTT API).
``semihost:STATUS``
    the firmware ends through semihosting with that status: ``SYS_EXIT_EXTENDED`` (0x20) with
    reason ``ADP_Stopped_ApplicationExit`` (0x20026) and the status as subcode, or ``SYS_EXIT``
    (0x18) with reason 0x20026, which on AArch32 carries no status and counts as 0 ("Semihosting
    for AArch32 and AArch64", Arm, sections 6.5 and 6.6). Other requests (SYS_WRITE0, SYS_WRITEC,
    SYS_WRITE to the console) are served by pyOCD's ``SemihostAgent`` and their text captured.
``word:ADDR=VALUE``
    the 32-bit word at ADDR (a number, or a symbol of the ELF) reads VALUE.

Whatever the kind, a HardFault fails the check at once: the check sets pyOCD's HardFault vector
catch (DEMCR.VC_HARDERR, ARMv7-M ARM C1.6.5) before the reset, so a fault halts the core at the
handler, and the faulting instruction's address is the PC in the stacked exception frame
(SP + 24, ARMv7-M ARM B1.5.6). A core in lockup fails it too. The captured text (RTT and
semihosting console) is kept, at most :data:`OUTPUT_LIMIT` bytes, in the result and the history.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, Optional, Union

from piflash.errors import BootCheckError
from piflash.firmware.symbols import elf_symbol
from piflash.targets.rtt import RTT_SYMBOL, RttUpChannel

__all__ = [
    "BootCheck",
    "BootResult",
    "parse_boot_check",
    "boot_check_from_mapping",
    "arm_boot_check",
    "run_boot_check",
    "elf_symbol",
    "DEFAULT_TIMEOUT",
    "OUTPUT_LIMIT",
    "KINDS",
]

#: Seconds a boot check waits when no timeout is given.
DEFAULT_TIMEOUT = 3.0
#: Bytes of RTT / semihosting text kept in a result and its history row (the first ones).
OUTPUT_LIMIT = 4096
#: The kinds of check.
KINDS = ("rtt", "semihost", "word")
#: Seconds between two looks at the target while waiting.
POLL_INTERVAL = 0.01

# Semihosting ("Semihosting for AArch32 and AArch64", Arm, 2022): operations and the reason code.
SYS_EXIT = 0x18
SYS_EXIT_EXTENDED = 0x20
ADP_STOPPED_APPLICATION_EXIT = 0x20026
BKPT_SEMIHOST = 0xBEAB  # Thumb "bkpt 0xab"
# Debug registers (ARMv7-M ARM C1.6): DFSR and its BKPT / VCATCH bits.
DFSR = 0xE000ED30
DFSR_BKPT = 1 << 1
DFSR_VCATCH = 1 << 3


@dataclass(frozen=True)
class BootCheck:
    """What to wait for after the reset.

    :ivar kind: ``"rtt"``, ``"semihost"`` or ``"word"``.
    :ivar pattern: the regular expression of an ``rtt`` check (str).
    :ivar status: the exit status a ``semihost`` check expects (int).
    :ivar address: the word's address (int) or an ELF symbol's name (str), for ``word``.
    :ivar value: the value (int) the word must reach.
    :ivar timeout: seconds to wait (float > 0).
    """

    kind: str
    pattern: Optional[str] = None
    status: Optional[int] = None
    address: Union[int, str, None] = None
    value: Optional[int] = None
    timeout: float = DEFAULT_TIMEOUT

    @property
    def spec(self) -> str:
        """The check as ``--boot-check`` takes it (``rtt:REGEX`` ...)."""
        if self.kind == "rtt":
            return f"rtt:{self.pattern}"
        if self.kind == "semihost":
            return f"semihost:{self.status}"
        addr = self.address if isinstance(self.address, str) else f"0x{self.address:08x}"
        return f"word:{addr}=0x{self.value:x}"


@dataclass
class BootResult:
    """What a boot check saw.

    :ivar check: the check's spec (``rtt:...``). :ivar passed: bool.
    :ivar detail: one sentence: what was seen (or not) and when.
    :ivar seconds: from the end of the reset to the verdict.
    :ivar output: the RTT / semihosting text read (the first :data:`OUTPUT_LIMIT` bytes, decoded
        as UTF-8 with replacement).
    :ivar fault_pc: the stacked PC of a HardFault (int), else None.
    :ivar exit_status: the semihosting exit status (int), else None.
    """

    check: str
    passed: bool = False
    detail: str = ""
    seconds: float = 0.0
    output: str = ""
    fault_pc: Optional[int] = None
    exit_status: Optional[int] = None
    _raw: bytearray = field(default_factory=bytearray, repr=False)

    def add_output(self, data: bytes) -> None:
        """Append text read from the target (kept up to :data:`OUTPUT_LIMIT` bytes)."""
        room = OUTPUT_LIMIT - len(self._raw)
        if room > 0:
            self._raw += data[:room]
            self.output = self._raw.decode("utf-8", "replace")

    def to_dict(self) -> Dict[str, object]:
        """The result's ``boot_check`` object (docs/result.md): check, passed, detail, seconds
        (rounded as every duration), output, fault_pc (``0x%08x`` or null), exit_status."""
        return {
            "check": self.check,
            "passed": self.passed,
            "detail": self.detail,
            "seconds": round(self.seconds, 4),
            "output": self.output,
            "fault_pc": None if self.fault_pc is None else f"0x{self.fault_pc:08x}",
            "exit_status": self.exit_status,
        }


# -- parsing ------------------------------------------------------------------------------------
def _number(text: str, what: str) -> int:
    try:
        return int(text.strip(), 0)
    except ValueError:
        raise ValueError(f"{what} '{text}' is not a number (e.g. 0 or 0x600db007)") from None


def parse_boot_check(text: str, timeout: Optional[float] = None) -> BootCheck:
    """A :class:`BootCheck` from ``rtt:REGEX``, ``semihost:STATUS`` or ``word:ADDR=VALUE``.

    :param timeout: seconds (> 0); None gives :data:`DEFAULT_TIMEOUT`.
    :raises ValueError: with a sentence saying what is wrong (the CLI makes it a usage error,
        exit 2; a profile makes it a profile error, exit 5).
    """
    kind, sep, arg = text.partition(":")
    kind = kind.strip().lower()
    if not sep or kind not in KINDS:
        raise ValueError(f"'{text}' is not a boot check: use rtt:REGEX, semihost:STATUS or word:ADDR=VALUE")
    if timeout is None:
        timeout = DEFAULT_TIMEOUT
    from piflash.limits import BOOT_TIMEOUT_MAX_S, seconds

    timeout = seconds(timeout, "the boot check's timeout", BOOT_TIMEOUT_MAX_S)
    if kind == "rtt":
        if not arg:
            raise ValueError("rtt: needs a regular expression to wait for, e.g. rtt:'self-test: PASS'")
        try:
            re.compile(arg)
        except (re.error, OverflowError, RecursionError) as exc:
            # OverflowError: a repeat count past the engine's limit (a{99999999999}).
            raise ValueError(f"rtt:{arg:.80} is not a valid regular expression ({exc})") from None
        return BootCheck("rtt", pattern=arg, timeout=float(timeout))
    if kind == "semihost":
        return BootCheck("semihost", status=_number(arg or "0", "semihost: status"), timeout=float(timeout))
    addr_text, eq, value_text = arg.partition("=")
    if not eq or not addr_text.strip() or not value_text.strip():
        raise ValueError(f"word:{arg} needs ADDR=VALUE, e.g. word:0x20000000=0x600db007 or word:boot_status=1")
    addr_text = addr_text.strip()
    address: Union[int, str]
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.$]*", addr_text):
        address = addr_text  # a symbol, resolved from the ELF
    else:
        address = _number(addr_text, "word: address")
        if not 0 <= address <= 0xFFFFFFFC:
            raise ValueError(f"word: address {addr_text} is not a 32-bit address")
        if address % 4:
            raise ValueError(f"word: address 0x{address:x} is not word aligned")
    value = _number(value_text, "word: value")
    if not 0 <= value <= 0xFFFFFFFF:
        raise ValueError(f"word: value {value_text} does not fit in 32 bits")
    return BootCheck("word", address=address, value=value, timeout=float(timeout))


def boot_check_from_mapping(mapping: Dict[str, object]) -> BootCheck:
    """A :class:`BootCheck` from a profile's ``boot_check:`` mapping: exactly one of ``rtt: REGEX``,
    ``semihost: STATUS`` or ``word: "ADDR=VALUE"``, and optionally ``timeout: SECONDS``.

    :raises ValueError: a sentence naming the key at fault.
    """
    kinds = [k for k in mapping if k in KINDS]
    unknown = [k for k in mapping if k not in KINDS and k != "timeout"]
    if unknown:
        raise ValueError(f"unknown key '{unknown[0]}' (use one of rtt, semihost, word, and timeout)")
    if len(kinds) != 1:
        raise ValueError("give exactly one of rtt, semihost or word")
    timeout = mapping.get("timeout")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))):
        raise ValueError(f"timeout must be a number of seconds, not {timeout!r}")
    return parse_boot_check(f"{kinds[0]}:{mapping[kinds[0]]}", timeout)


# -- running ------------------------------------------------------------------------------------
class _Console:
    """A pyOCD semihosting I/O handler that keeps console output in the result (files refused)."""

    def __new__(cls, result: BootResult):
        from pyocd.debug.semihost import SemihostIOHandler

        class Console(SemihostIOHandler):
            def write(self, fd: int, ptr: int, length: int) -> int:
                result.add_output(self.agent.get_data(ptr, length))
                return 0  # bytes not written

            def read(self, fd: int, ptr: int, length: int) -> int:
                return length  # nothing to read: all bytes "not read"

        return Console()


class _Watch:
    """One boot check in progress on an open session."""

    def __init__(self, session, check: BootCheck, firmware_path: Optional[str]) -> None:
        self.session = session
        self.target = session.target
        self.check = check
        self.firmware_path = firmware_path
        self.result = BootResult(check.spec)
        self._rtt = RttUpChannel(self.target, elf_symbol(firmware_path, RTT_SYMBOL))
        self._agent = None
        self._search = None
        if check.kind == "rtt":
            from piflash.production.textsearch import TextSearch

            self._search = TextSearch(check.pattern)
        #: True when the verdict is that the pattern's search took too long.
        self.search_too_slow = False
        self._word_addr: Optional[int] = None
        self._last_word = 0
        #: True when the verdict is the timeout.
        self.expired = False
        if check.kind == "word":
            if isinstance(check.address, str):
                addr = elf_symbol(firmware_path, check.address)
                if addr is None:
                    raise BootCheckError(
                        f"boot check {check.spec}: no symbol '{check.address}' in the firmware",
                        self.result,
                        hint="give the word's address as a number, or flash an ELF that defines the symbol",
                    )
                self._word_addr = addr
            else:
                self._word_addr = check.address
            from piflash.targets.catalog import describe_regions, region_holding

            memory_map = self.target.get_memory_map()
            if region_holding(memory_map, self._word_addr) is None:
                raise BootCheckError(
                    f"boot check {check.spec}: the word at 0x{self._word_addr:08x} is in none of the target's "
                    f"memory ({describe_regions(memory_map)}): reading it would fault",
                    self.result,
                    hint="give the address of a variable in RAM (or its ELF symbol)",
                )

    # -- one look at the target --------------------------------------------------------------
    def look(self) -> bool:
        """Look once; True when the verdict is in (passed or failed)."""
        from pyocd.core.target import Target

        state = self.target.get_state()  # a DHCSR read
        if state == Target.State.LOCKUP:
            return self._fail("the core locked up (a fault while taking a fault)")
        if state == Target.State.HALTED and self._halted():
            return True
        if self.check.kind == "rtt":
            return self._read_rtt()
        if self.check.kind == "word":
            word = self.target.read32(self._word_addr)
            if word == self.check.value:
                return self._pass(f"the word at 0x{self._word_addr:08x} reads 0x{word:08x}")
            self._last_word = word
        return False

    def _halted(self) -> bool:
        """The core halted: a fault, a semihosting request, or a stop; True when decided."""
        target = self.target
        dfsr = target.read32(DFSR)
        if dfsr & DFSR_VCATCH:
            sp = target.read_core_register("sp")
            pc = target.read32(sp + 24)
            self.result.fault_pc = pc
            self._read_rtt()
            return self._fail(f"the firmware took a HardFault at PC 0x{pc:08x} (stacked)")
        if dfsr & DFSR_BKPT:
            pc = target.read_core_register("pc")
            if target.read16(pc) == BKPT_SEMIHOST:
                op = target.read_core_register("r0")
                arg = target.read_core_register("r1")
                if op in (SYS_EXIT, SYS_EXIT_EXTENDED):
                    return self._semihost_exit(op, arg)
                self._agent_handle()
                target.resume()
                return False
            return self._fail(f"the core stopped at a breakpoint at 0x{pc:08x}")
        return self._fail("the core halted")

    def _agent_handle(self) -> None:
        if self._agent is None:
            from pyocd.debug.semihost import SemihostAgent

            self._agent = SemihostAgent(self.target.get_target_context(), console=_Console(self.result))
        self._agent.check_and_handle_semihost_request()

    def _semihost_exit(self, op: int, arg: int) -> bool:
        if op == SYS_EXIT_EXTENDED:
            reason, status = self.target.read_memory_block32(arg, 2)
        else:
            reason, status = arg, 0
        if reason != ADP_STOPPED_APPLICATION_EXIT:
            return self._fail(
                f"the firmware stopped through semihosting with reason 0x{reason:x}, "
                f"not an application exit (0x{ADP_STOPPED_APPLICATION_EXIT:x})"
            )
        status &= 0xFFFFFFFF
        if status >= 0x80000000:
            status -= 1 << 32
        self.result.exit_status = status
        if self.check.kind != "semihost":
            return self._fail(f"the firmware exited through semihosting with status {status}")
        if status == self.check.status:
            return self._pass(f"the firmware exited through semihosting with status {status}")
        return self._fail(f"the firmware exited through semihosting with status {status}, expected {self.check.status}")

    def _read_rtt(self) -> bool:
        data = self._rtt.read()
        if data:
            self.result.add_output(data)
            if self._search is not None:
                from piflash.production.textsearch import SearchTooSlow

                try:
                    matched = self._search.feed(data.decode("utf-8", "replace"))
                except SearchTooSlow as exc:
                    self.search_too_slow = True
                    return self._fail(f"searching RTT channel 0's text for '{self.check.pattern}' stopped: {exc}")
                if matched:
                    return self._pass(f"RTT channel 0 printed text matching '{self.check.pattern}'")
        return False

    def close(self) -> None:
        """End the pattern's search process, if any."""
        if self._search is not None:
            self._search.close()

    # -- verdicts -----------------------------------------------------------------------------
    def _pass(self, detail: str) -> bool:
        self.result.passed = True
        self.result.detail = detail
        return True

    def _fail(self, detail: str) -> bool:
        self.result.passed = False
        self.result.detail = detail
        return True

    def timed_out(self) -> None:
        """The timeout passed without a verdict: say what was (not) seen."""
        self.expired = True
        check = self.check
        waited = f"within {check.timeout:g} s"
        if check.kind == "rtt":
            if not self._rtt.found:
                self.result.detail = f"no RTT control block was found {waited}"
            else:
                self.result.detail = (
                    f"RTT channel 0 printed no text matching '{check.pattern}' {waited} "
                    f"({len(self.result.output)} characters read)"
                )
        elif check.kind == "semihost":
            self.result.detail = f"the firmware did not exit through semihosting {waited}"
        else:
            self.result.detail = (
                f"the word at 0x{self._word_addr:08x} did not reach 0x{check.value:08x} "
                f"{waited} (it reads 0x{self._last_word:08x})"
            )


def _hint(result: BootResult, expired: bool, firmware_path: Optional[str], too_slow: bool = False) -> str:
    if too_slow:
        return (
            "the pattern backtracks without end on this text (a repeat inside a repeat, such as "
            "(a+)+ or (\\w|\\d)*): write it without nesting, e.g. 'self-test: PASS'"
        )
    if result.fault_pc is not None:
        where = (
            f" -e {os.path.abspath(firmware_path)}"
            if firmware_path and firmware_path.endswith(".elf")
            else " -e FIRMWARE.elf"
        )
        return (
            f"the firmware crashed as it started: 'arm-none-eabi-addr2line{where} "
            f"0x{result.fault_pc:08x}' names the line"
        )
    if expired:
        return (
            "the board does not start or does not say so: check its clock and power settings and "
            "that the firmware prints (or exits) as the check expects; --boot-timeout SECONDS waits "
            "longer"
        )
    return "the firmware started but did not report success: read its output (piflash history shows it)"


def arm_boot_check(session, check: Optional[BootCheck] = None, firmware_path: Optional[str] = None) -> int:
    """Prepare the board for ``check`` before the reset that starts the firmware: set pyOCD's
    HardFault vector catch (DEMCR.VC_HARDERR), so that a fault in the firmware's first
    instructions halts the core, and for an ``rtt`` check wipe the ID of any RTT control block a
    previous firmware left in RAM (SRAM keeps its contents through a reset, so an old block would
    be read as the new firmware's): the 16 ID bytes at the ELF's ``_SEGGER_RTT``, or every
    ``"SEGGER RTT"`` ID found by reading all of the default RAM region when there is no symbol.

    :returns: the vector catch mask before (pyOCD's ``Target.VectorCatch`` bits), for
        :func:`run_boot_check` to set back.
    """
    from pyocd.core.target import Target

    target = session.target
    if check is not None and check.kind == "rtt":
        RttUpChannel(target, elf_symbol(firmware_path, RTT_SYMBOL)).wipe_stale()
    previous = target.get_vector_catch()
    target.set_vector_catch(previous | Target.VectorCatch.HARD_FAULT)
    return previous


def run_boot_check(
    session,
    check: BootCheck,
    firmware_path: Optional[str] = None,
    vector_catch_before: Optional[int] = None,
    clock: Callable[[], float] = time.monotonic,
) -> BootResult:
    """Run ``check`` on the board of an open pyOCD ``session`` whose firmware was just started.

    Call :func:`arm_boot_check` before the reset and pass what it returned as
    ``vector_catch_before`` (without it, the catch is set now: faults from now on count). The
    target is looked at every :data:`POLL_INTERVAL` seconds until the verdict or ``check.timeout``
    seconds; the vector catch is then set back.

    :param firmware_path: the flashed file; an ELF gives the RTT block's and word symbols' addresses.
    :param clock: seconds (monotonic), for the timeout.
    :returns: the :class:`BootResult` of a passed check.
    :raises BootCheckError: (exit 26) the check failed or timed out; ``.boot_result`` has what was seen.
    """
    target = session.target
    if vector_catch_before is None:
        vector_catch_before = arm_boot_check(session, check, firmware_path)
    watch = None
    try:
        watch = _Watch(session, check, firmware_path)
        start = clock()
        deadline = start + check.timeout
        while True:
            if watch.look():
                break
            if clock() >= deadline:
                watch.timed_out()
                break
            time.sleep(POLL_INTERVAL)
        watch.result.seconds = clock() - start
    finally:
        if watch is not None:
            watch.close()
        try:
            target.set_vector_catch(vector_catch_before)
        except Exception:  # noqa: BLE001 - the board may be gone; the verdict stands
            pass
    result = watch.result
    if not result.passed:
        raise BootCheckError(
            f"boot check {check.spec} failed: {result.detail}",
            result,
            hint=_hint(result, watch.expired, firmware_path, watch.search_too_slow),
        )
    return result
