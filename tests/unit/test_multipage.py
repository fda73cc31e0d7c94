"""Several pages per flash-algorithm call (piflash/flashing/multipage.py), on pyOCD's own algorithms.

The simulated core executes the algorithm's real instructions and the simulated flash controller
carries out its writes, so a run that programs byte for byte here is a run the algorithm really
programs in one call: an algorithm that stopped after one page would leave the rest erased.
"""

from __future__ import annotations

import logging
import random

import pytest

from piflash.flashing import multipage

BASE = {"nrf51": 0x0, "nrf52840": 0x0, "stm32f103rc": 0x08000000, "rp2040": 0x10000000}
PAGE = {"nrf51": 1024, "nrf52840": 4096, "stm32f103rc": 2048, "rp2040": 256}
RUN = {"nrf51": 6144, "nrf52840": 8192, "stm32f103rc": 8192, "rp2040": 16384}    # RP2: RUN_BYTES
#: Buffers runs may grow to (multipage.GROW_BYTES, or half the RAM left on the nRF51 and STM32F103RC).
BUFFER = {"nrf51": 6144, "nrf52840": 32768, "stm32f103rc": 26624, "rp2040": 32768}
TARGETS = list(BASE)


def _session(target: str, board: str):
    from piflash.sim.store import SimStore
    from piflash.targets.connect import open_session

    SimStore().create(board, target, exist_ok=True)
    return open_session(f"sim:{board}", target)


def _boot_flash(session):
    return session.target.memory_map.get_boot_memory().flash


def _rand(n: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(n)


@pytest.mark.parametrize("target", TARGETS)
def test_pyocds_algorithms_for_the_targets_are_known(target):
    with _session(target, f"known-{target}") as session:
        flash = _boot_flash(session)
        layout = multipage.layout_for(flash, flash.region.page_size)
    assert layout is not None, multipage.algorithm_digest(flash.flash_algo)
    assert layout.run_size == RUN[target]
    assert layout.buffer_size == BUFFER[target]
    lo, hi = min(layout.buffers), max(layout.buffers) + layout.buffer_size
    algo = flash.flash_algo
    # Nothing the algorithm or its stack uses (pyOCD's analyzer is loaded again by every call).
    assert lo >= max(flash.end_flash_algo, algo["begin_stack"])
    ram = session.target.memory_map.get_region_for_address(lo)
    assert ram.is_ram and ram.contains_range(lo, end=hi - 1)


@pytest.mark.parametrize("target", TARGETS)
def test_one_call_programs_several_pages(target):
    """Runs of three pages, a gap, and a one-page run: byte-exact, the gap left erased."""
    from piflash.sim.store import SimStore

    page, base = PAGE[target], BASE[target]
    three, one = _rand(3 * page, 1), _rand(page, 2)
    runs = [(base + page, three), (base + 5 * page, one)]
    calls = []
    with _session(target, f"runs-{target}") as session:
        flash = _boot_flash(session)
        layout = multipage.layout_for(flash, flash.region.page_size)
        flash.init(flash.Operation.PROGRAM)
        multipage.RunProgrammer(flash, layout).program(runs, calls.append)
        flash.uninit()
        flash.cleanup()
    assert calls == [3 * page, page]
    dump = SimStore().read_flash(f"runs-{target}")
    assert dump[page:4 * page] == three
    assert dump[4 * page:5 * page] == b"\xff" * page
    assert dump[5 * page:6 * page] == one
    assert dump[:page] == b"\xff" * page


@pytest.mark.parametrize("target", ["nrf51", "stm32f103rc", "rp2040"])
def test_flash_firmware_uses_fewer_calls_and_is_byte_exact(target, caplog):
    from piflash.firmware.image import image_from_bytes
    from piflash.jobs.workflow import flash_firmware
    from piflash.sim.store import SimStore

    data = _rand(11 * PAGE[target] + 100, 3)      # a partial last page
    SimStore().create(f"ff-{target}", target)
    with caplog.at_level(logging.DEBUG, logger="piflash.flashing.plan"):
        flash_firmware(image_from_bytes(data, BASE[target]), probe=f"sim:ff-{target}", target=target)
    assert SimStore().read_flash(f"ff-{target}")[:len(data)] == data
    pages, calls, run, left = 12, 0, PAGE[target], 12 * PAGE[target]
    while left > 0:                                # one page, then doubling up to the run size
        calls, left, run = calls + 1, left - run, min(RUN[target], 2 * run)
    assert f"{pages} pages in {calls} calls of up to {RUN[target]} B" in caplog.text


def test_an_unknown_algorithm_keeps_one_page_per_call():
    from pyocd.flash.flash import Flash

    with _session("nrf52840", "unknown") as session:
        flash = _boot_flash(session)
        changed = dict(flash.flash_algo, instructions=list(flash.flash_algo["instructions"]))
        changed["instructions"][-1] ^= 1           # another build of the algorithm
        other = Flash(session.target, changed)
        other.region = flash.region
        assert multipage.layout_for(other, flash.region.page_size) is None
        single = dict(flash.flash_algo, page_buffers=flash.flash_algo["page_buffers"][:1])
        assert multipage.layout_for(Flash(session.target, single), flash.region.page_size) is None


def test_a_failed_run_names_the_page_that_failed():
    """STM32F1: a write-protected page makes pyOCD's algorithm return 1 (it reads back each
    half-word): the error names that page, not the run's first (issue 19 item 18), and the pages
    before the protected one are written."""
    from pyocd.core.exceptions import FlashProgramFailure

    from piflash.sim.store import SimStore

    board, base, page = "wp", BASE["stm32f103rc"], PAGE["stm32f103rc"]
    SimStore().create(board, "stm32f103rc")
    SimStore().set_faults(board, write_protect=[base + 2 * page])
    data = _rand(4 * page, 4)
    with _session("stm32f103rc", board) as session:
        flash = _boot_flash(session)
        layout = multipage.layout_for(flash, flash.region.page_size)
        flash.init(flash.Operation.PROGRAM)
        with pytest.raises(FlashProgramFailure) as err:
            multipage.RunProgrammer(flash, layout).program([(base, data)], lambda n: None)
        flash.uninit()
        flash.cleanup()
    assert err.value.address == base + 2 * page and err.value.result_code == 1
    assert f"at page {base + 2 * page:#010x} ({4 * page} bytes from {base:#010x} in one call)" in str(err.value)
    assert SimStore().read_flash(board)[:2 * page] == data[:2 * page]


def test_group_runs():
    pages = [(0, b"a" * 4), (4, b"b" * 4), (8, b"c" * 4), (16, b"d" * 4), (20, b"e" * 4)]
    assert multipage.group_runs(pages, 8) == [(0, b"aaaabbbb"), (8, b"cccc"), (16, b"ddddeeee")]
    assert multipage.group_runs(pages, 1024) == [(0, b"aaaabbbbcccc"), (16, b"ddddeeee")]
    assert multipage.group_runs([], 8) == []
    # Ramp: one page first, then each run up to twice the one before, up to the run size.
    eight = [(4 * i, bytes([i]) * 4) for i in range(16)]
    assert [len(d) for _, d in multipage.group_runs(eight, 24, first_run=4)] == [4, 8, 16, 24, 12]


def test_pyocds_analyzer_works_after_runs_overwrote_its_ram():
    """The nRF51's run buffers cover the analyzer's RAM: Flash.compute_crcs loads the analyzer
    again on every call, so a CRC after programming is still right."""
    import binascii

    page = PAGE["nrf51"]
    data = _rand(12 * page, 5)
    with _session("nrf51", "analyzer-after") as session:
        flash = _boot_flash(session)
        layout = multipage.layout_for(flash, flash.region.page_size)
        algo = flash.flash_algo
        assert min(layout.buffers) <= algo["analyzer_address"] < max(layout.buffers) + layout.run_size
        flash.init(flash.Operation.PROGRAM)
        multipage.RunProgrammer(flash, layout).program(multipage.group_runs(
            [(i * page, data[i * page:(i + 1) * page]) for i in range(12)], layout.run_size), lambda n: None)
        crcs = flash.compute_crcs([(i * page, page) for i in range(12)])
        flash.uninit()
        flash.cleanup()
    assert [c & 0xFFFFFFFF for c in crcs] == [binascii.crc32(data[i * page:(i + 1) * page]) for i in range(12)]


def _program(session, runs):
    flash = _boot_flash(session)
    layout = multipage.layout_for(flash, flash.region.page_size)
    flash.init(flash.Operation.PROGRAM)
    try:
        multipage.RunProgrammer(flash, layout).program(runs, lambda n: None)
    finally:
        flash.uninit()
        flash.cleanup()
    return flash, layout


@pytest.mark.parametrize("target", TARGETS)
def test_the_algorithm_stack_stays_clear_of_the_run_caller(target):
    """The run caller sits STACK_BYTES below the algorithm's initial stack pointer: paint that
    stack, program several runs, and find how deep ProgramPage and the caller went."""
    page, base = PAGE[target], BASE[target]
    paint = 0x5A5A5A5A
    with _session(target, f"stack-{target}") as session:
        flash = _boot_flash(session)
        layout = multipage.layout_for(flash, flash.region.page_size)
        top = flash.flash_algo["begin_stack"]
        low = layout.caller + multipage.CALLER_BYTES
        assert top - low == multipage.STACK_BYTES
        flash.init(flash.Operation.PROGRAM)
        session.target.write_memory_block32(low, [paint] * ((top - low) // 4))
        data = _rand(3 * layout.run_size // page * page, 6)
        multipage.RunProgrammer(flash, layout).program(
            multipage.group_runs([(base + i, data[i:i + page]) for i in range(0, len(data), page)],
                                 layout.run_size), lambda n: None)
        stack = session.target.read_memory_block32(low, (top - low) // 4)
        code = bytes(session.target.read_memory_block8(layout.caller, len(multipage.run_caller())))
        flash.uninit()
        flash.cleanup()
    used = next(i for i, word in enumerate(stack) if word != paint)
    depth = top - (low + 4 * used)
    assert 0 < depth <= 128, f"{depth} bytes of stack"
    assert code == multipage.run_caller()


def test_a_call_that_halts_without_returning_is_a_failure(monkeypatch):
    """A caller that halts before ProgramPage returns (a fault, a clobbered caller) leaves the
    byte count in the mailbox: a failure named by the run, not a success."""
    from pyocd.core.exceptions import FlashProgramFailure

    monkeypatch.setattr(multipage, "run_caller", lambda: b"\x00\xbe")     # BKPT #0 only
    page = PAGE["nrf51"]
    with _session("nrf51", "no-return") as session:
        with pytest.raises(FlashProgramFailure,
                           match="the core halted before the flash algorithm returned") as err:
            _program(session, [(page, _rand(2 * page, 7))])
    assert err.value.address == page
    from piflash.probe.pyocd_errors import translate_error

    error = translate_error(err.value, "program")
    assert "did not run the flash algorithm to its end" in error.hint and "write-protected" not in error.hint


def test_a_call_that_faults_is_a_lockup_not_a_timeout(monkeypatch):
    """A fault in the call (here an undefined instruction: UDF #0) locks the core up, as a
    HardFault with no handler does: reported at once as the core's failure, not after
    flash.timeout.program as a stuck flash controller."""
    import time

    from pyocd.core.exceptions import FlashProgramFailure

    monkeypatch.setattr(multipage, "run_caller", lambda: b"\x00\xde")     # UDF #0
    page = PAGE["nrf51"]
    with _session("nrf51", "lockup") as session:
        session.options["flash.timeout.program"] = 30.0
        started = time.monotonic()
        with pytest.raises(FlashProgramFailure, match="the core locked up") as err:
            _program(session, [(page, _rand(2 * page, 11))])
        assert time.monotonic() - started < 10
    assert err.value.address == page


def test_a_call_costs_two_probe_round_trips_on_cmsis_dap():
    """Through pyOCD's CMSIS-DAP driver and the simulated USB probe (DAPLink: 64-byte HID
    reports): the image crosses in DAP_TransferBlock commands plus one DAP_Transfer per 1 KiB
    (the tail of each TAR block); each call adds two (start; poll and result), where pyOCD's
    call sequence takes nine. Polls that find the core still running (the last run programs
    after the last transfer) are counted apart."""
    pytest.importorskip("unicorn")
    from pyocd.core.helpers import ConnectHelper

    from piflash.sim import SimStore
    from piflash.sim.probes import usb as sim_usb

    runs, calls = 4, []
    store = SimStore()
    store.create("trips", "nrf51", exist_ok=True)
    device = sim_usb.install("trips@daplink", store).devices[0]
    try:
        session = ConnectHelper.session_with_chosen_probe(unique_id=device.serial, blocking=False,
                                                          target_override="nrf51")
        with session:
            flash = _boot_flash(session)
            layout = multipage.layout_for(flash, flash.region.page_size)
            data = _rand(runs * layout.run_size, 8)
            flash.init(flash.Operation.PROGRAM)
            before = device.clock.requests["DAP_Transfer"] - device.clock.requests["core_polls_running"]
            multipage.RunProgrammer(flash, layout).program(
                [(i, data[i:i + layout.run_size]) for i in range(0, len(data), layout.run_size)],
                calls.append)
            transfers = (device.clock.requests["DAP_Transfer"] - device.clock.requests["core_polls_running"]
                         - before)
            flash.uninit()
            flash.cleanup()
    finally:
        sim_usb.uninstall()
    assert calls == [layout.run_size] * runs
    assert store.read_flash("trips")[:len(data)] == data
    setup = 4                       # the caller and mailboxes, R4-R6
    assert transfers <= len(data) // 1024 + 2 * runs + setup, transfers


def test_runs_double_only_when_the_polls_show_the_link_well_ahead_of_the_flash():
    """(size, next size, polls still running): the flash 10 polls a KiB, the link 1 or 3 ->
    double; the link 4.5 (b/a over GROW_RATIO) -> keep; a call with no poll running (the link
    the slower) -> keep; the ramp's calls alone (1 -> 2 -> 4: one ratio) tell nothing until a
    call whose ratio differs."""
    assert multipage.link_outpaces_flash([(4, 8, 40 - 8), (8, 8, 80 - 8)])
    assert multipage.link_outpaces_flash([(4, 8, 40 - 24), (8, 8, 80 - 24)])
    assert not multipage.link_outpaces_flash([(4, 8, 40 - 36), (8, 8, 80 - 36)])
    assert not multipage.link_outpaces_flash([(4, 8, 0), (8, 8, 72)])
    ramp = [(1, 2, 10 - 2), (2, 4, 20 - 4)]
    assert not multipage.link_outpaces_flash(ramp)
    assert multipage.link_outpaces_flash(ramp + [(4, 8, 40 - 8), (8, 8, 80 - 8)])


@pytest.mark.parametrize("preset,grows", [("mculink", True), ("daplink", False)])
def test_runs_grow_on_a_link_that_outpaces_the_flash(preset, grows):
    """nRF52840, 96 KiB at piflash's 4 MHz SWD through pyOCD's CMSIS-DAP driver and the simulated
    USB probe: on the MCU-Link (high-speed USB, 1 KiB packets) 8 KiB cross in about a quarter of
    the 84 ms the flash takes, so calls grow past the 8 KiB runs they were given, up to the
    32 KiB buffers; on DAPLink (64-byte HID reports) the bytes cross slower than the flash
    writes them and every call keeps its run. Byte-exact either way. (At pyOCD's 1 MHz the
    MCU-Link's wire is as slow as the flash, and its runs keep their size too.)"""
    pytest.importorskip("unicorn")
    from pyocd.core.helpers import ConnectHelper

    from piflash.sim import SimStore
    from piflash.sim.probes import usb as sim_usb

    page, board, calls = PAGE["nrf52840"], f"grow-{preset}", []
    store = SimStore()
    store.create(board, "nrf52840", exist_ok=True)
    device = sim_usb.install(f"{board}@{preset}", store).devices[0]
    data = _rand(24 * page, 9)
    try:
        session = ConnectHelper.session_with_chosen_probe(unique_id=device.serial, blocking=False,
                                                          target_override="nrf52840", frequency=4_000_000)
        with session:
            flash = _boot_flash(session)
            layout = multipage.layout_for(flash, page)
            runs = multipage.group_runs([(a, data[a:a + page]) for a in range(0, len(data), page)],
                                        layout.run_size, first_run=page)
            flash.init(flash.Operation.PROGRAM)
            multipage.RunProgrammer(flash, layout).program(runs, calls.append)
            flash.uninit()
            flash.cleanup()
    finally:
        sim_usb.uninstall()
    assert store.read_flash(board)[:len(data)] == data
    assert sum(calls) == len(data)
    if grows:
        assert len(calls) < len(runs) and max(calls) == layout.buffer_size, calls
    else:
        assert calls == [len(d) for _, d in runs]
