"""``piflash flash``, ``verify``, ``erase`` and ``reset``: the commands that open a probe and act
on the target, each a thin layer over :mod:`piflash.jobs.workflow` that records its result in the
history."""

from __future__ import annotations

from typing import Optional

import click

from piflash.cli.options import (
    CONTEXT,
    EXIT_CODES_EPILOG,
    Seconds,
    Settings,
    confirm_mass_erase,
    emit_json,
    firmware_options,
    handles_errors,
    memory_guarded,
    output_options,
    probe_options,
    require_transport,
    reset_option,
    resolve,
    session_options,
    sigterm_as_interrupt,
    yes_option,
)
from piflash.errors import PiflashError
from piflash.flashing.program import ERASE_MODES
from piflash.limits import BOOT_TIMEOUT_MAX_S

#: ``--labgrid-place PLACE`` of ``flash`` and ``reset``: the row's ``labgrid_place`` (docs/result.md).
labgrid_place_option = click.option(
    "--labgrid-place",
    "labgrid_place",
    metavar="PLACE",
    help="Record the labgrid place the board is reached through in the history row (piflash's labgrid "
    "driver passes it, docs/ci.md).",
)


def _placed(on_connected, labgrid_place: Optional[str]):
    """``on_connected`` that first stamps ``labgrid_place`` on the result (so the row has it from its opening)."""

    def hook(result):
        result.labgrid_place = labgrid_place
        on_connected(result)

    return hook


def _load(settings: Settings):
    from piflash.firmware.image import load_image

    if not settings.firmware:
        raise click.UsageError("no firmware given (a FIRMWARE argument or a profile with 'firmware:')")
    if settings.profile_obj is not None:
        return settings.profile_obj.load_image()
    regions = None
    if settings.target:  # the flash known before the file is read: a record past it stops the parse
        from piflash.targets.catalog import resolve_target

        try:
            regions = resolve_target(settings.target, list(settings.pack) if settings.pack else None).flash_regions
        except PiflashError:
            pass  # reported where it was before, after the file's own errors
    return load_image(settings.firmware, settings.base_address, flash_regions=regions, target=settings.target or "")


def _run_with_progress(settings: Settings, quiet: bool, json_mode: bool, call):
    """Run ``call(display, on_connected)`` with the progress display, recorded (see :func:`_recorded`)."""
    from piflash.cli.progress import RichProgress, make_progress

    display = make_progress(quiet, json_mode)
    if isinstance(display, RichProgress):
        with display:
            return _recorded(settings, lambda on_connected: call(display, on_connected))
    return _recorded(settings, lambda on_connected: call(display, on_connected))


class _Recorder:
    """The history row of one CLI operation: opened when the workflow first reaches the board
    (:mod:`piflash.jobs.workflow`'s ``on_connected``), completed at the end, passed or failed. A history
    that cannot be written warns once on stderr and never fails the job.

    The row takes ``settings.serial`` (str) when set, and the result's ``protection`` attribute
    ("open", "locked"), ``serial`` and ``patch`` when it has them.
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.db = None
        self.row: "int | None" = None
        self._warned = False

    def _warn(self, exc) -> None:
        if not self._warned:
            self._warned = True
            click.secho(f"warning: history not written: {exc.message}", fg="yellow", err=True)

    def touch(self, result) -> None:
        from piflash.record.history import History, HistoryError, default_path

        path = default_path()
        if path is None or self.row is not None:
            return
        try:
            self.db = History(path)
            self.row = self.db.open(result, profile=self.settings.profile, serial=self.settings.serial)
        except HistoryError as exc:
            self._warn(exc)

    def complete(self, result) -> None:
        from piflash.record.history import HistoryError

        try:
            if self.row is not None and result is not None:
                self.db.complete(
                    self.row,
                    result,
                    protection=getattr(result, "protection", None),
                    serial=getattr(result, "serial", None),
                    patch=getattr(result, "patch", None),
                )
        except HistoryError as exc:
            self._warn(exc)
        finally:
            if self.db is not None:
                self._to_ledger()
                self.db.close()
                self.db = None

    def _to_ledger(self) -> None:
        """With a ledger (``flash --ledger URL`` or ``PIFLASH_LEDGER``), mark this row for it and
        upload the rows so marked the ledger has not got yet (this one, and any queued while it was
        away), not the rest of the history (``piflash ledger upload --all-history`` sends that), under
        the origin ``PIFLASH_STATION`` or ``one-off:HOST:ID8``
        (:func:`piflash.record.ledger.one_off_upload`). A ledger that cannot be reached or refuses
        warns; the row waits in the history for the next upload."""
        from piflash.errors import LedgerConflictError
        from piflash.errors import PiflashError as _Error
        from piflash.record.ledger import Ledger, ledger_url, one_off_upload

        url = ledger_url(self.settings.ledger)
        if not url:
            return
        try:
            if self.row is not None:
                self.db.ask_ledger(self.row)
            with Ledger(url) as ledger:
                one_off_upload(ledger, self.db)
        except _Error as exc:
            click.secho(f"warning: not in the ledger yet (queued in the history): {exc.message}", fg="yellow", err=True)
            if isinstance(exc, LedgerConflictError):
                click.secho(f"hint: {exc.hint}", fg="yellow", err=True)


def _recorded(settings: Settings, call):
    """Run ``call(on_connected)`` (a workflow call) and record its result in the history.

    The row is opened when the board is first reached and completed here; an operation that
    never reached the board (exit 2-9: bad input, no or several probes, no permission) records
    nothing. A process killed in between leaves the row open: the next run shows it as
    "interrupted (process died)".
    """
    rec = _Recorder(settings)
    try:
        result = call(rec.touch)
    except PiflashError as exc:
        rec.complete(exc.result)
        raise
    except BaseException:
        rec.complete(None)  # left open: a bug or an interrupt outside a phase
        raise
    rec.complete(result)
    return result


def _report(result, json_mode: bool, quiet: bool, line: str) -> None:
    if json_mode:
        emit_json(result.to_dict())
    elif not quiet:
        from piflash.cli.progress import fit_line

        click.secho(fit_line(line), fg="green")


@click.command(epilog=EXIT_CODES_EPILOG, context_settings=CONTEXT)
@firmware_options
@probe_options
@click.option(
    "--erase",
    "-e",
    type=click.Choice(ERASE_MODES),
    default=None,
    help="Erase mode: auto (only the sectors that must change; never a chip erase), sector, or chip "
    "(mass erase first) [default: auto, or the profile's].",
)
@click.option(
    "--verify/--no-verify",
    default=None,
    help="Read back and compare every programmed byte [default: on, or the profile's].",
)
@click.option(
    "--serial",
    "serial",
    type=click.IntRange(min=0),
    metavar="N",
    help="Serial number for this one board, written where the profile's 'serial:' says "
    "(one-offs; the station takes numbers from the counter). A number already issued "
    "is refused (exit 25).",
)
@click.option(
    "--force-serial",
    is_flag=True,
    help="Re-issue a --serial number already issued, on purpose (recorded as a re-issue).",
)
@click.option(
    "--boot-check",
    "boot_check",
    metavar="CHECK",
    help="After the reset, prove the firmware starts: 'rtt:REGEX' (RTT channel 0 text), "
    "'semihost:STATUS' (semihosting exit status) or 'word:ADDR=VALUE' (ADDR a number or "
    "an ELF symbol); 'off' skips the profile's. A failed check is exit 26.",
)
@click.option(
    "--boot-timeout",
    type=Seconds(BOOT_TIMEOUT_MAX_S),
    metavar="SECONDS",
    help="Seconds the boot check waits, at most 3600 [default: the profile's, else 3].",
)
@click.option(
    "--ledger",
    "ledger",
    metavar="URL",
    help="Copy the history row to the central ledger, postgresql://... [default: $PIFLASH_LEDGER] (docs/ledger.md).",
)
@click.option(
    "--allowed-signers",
    "allowed_signers",
    metavar="FILE",
    help="Flash a job bundle (FIRMWARE a JOB.pfb) only when signed by a key of this OpenSSH allowed_signers "
    "file; a bundle is refused without it (exit 28, docs/bundles.md).",
)
@labgrid_place_option
@reset_option
@output_options
@handles_errors
@memory_guarded("flash")
def flash(
    firmware,
    probe,
    target,
    frequency,
    profile,
    pyocd_options,
    base_address,
    erase,
    verify,
    serial,
    force_serial,
    boot_check,
    boot_timeout,
    ledger,
    allowed_signers,
    labgrid_place,
    reset,
    quiet,
    json_mode,
):
    """Flash FIRMWARE (.hex, .elf, .uf2, or .bin with --base-address), verify it and reset the target.

    FIRMWARE may be a signed job bundle, JOB.pfb, with --allowed-signers: its signature, files,
    target and version are checked before any probe is opened (docs/bundles.md).

    With a profile's 'serial:'/'patch:' the board's own bytes are laid over the image, and that
    patched image is programmed and verified; with 'protect: lock' the chip is locked after a
    passed verify and the lock is read back. With --boot-check (or the profile's 'boot_check:')
    the board counts as flashed only once its firmware shows it started (docs/boot-check.md).
    """
    import dataclasses

    from piflash.jobs.transports import flash_needs, flash_transport, require

    sigterm_as_interrupt()
    bundle = None
    if allowed_signers is not None or _is_bundle(firmware):
        bundle = _open_bundle(firmware, profile, allowed_signers, target, base_address, ledger)
        profile, firmware = str(bundle.profile.path), None
    s = resolve(
        profile,
        firmware=firmware,
        probe=probe,
        target=target,
        frequency=frequency,
        erase=erase,
        base_address=base_address,
        verify=verify,
        reset=reset,
    )
    prof = s.profile_obj
    plan = prof.patch_plan if prof is not None else None
    protect = prof.protect if prof is not None else None
    if force_serial and serial is None:
        raise click.UsageError("--force-serial re-issues the number given with --serial N: give --serial")
    if serial is not None and (plan is None or not plan.uses_serial):
        raise click.UsageError("--serial needs a profile with a 'serial:' section (where and how to write it)")
    if plan is not None and plan.uses_serial and serial is None:
        raise click.UsageError(
            f"profile {prof.name} numbers its boards: give this one's number with "
            "--serial N (the station takes numbers from the counter)"
        )
    if protect == "lock" and not s.job.verify:
        raise click.UsageError(
            f"profile {prof.name} locks boards after a passed verify: --no-verify would lock an unverified board"
        )
    check = _boot_check(prof, boot_check, boot_timeout, s.job.reset)
    if ledger is not None:
        from piflash.redact import is_conninfo, redact_conninfo

        if not is_conninfo(ledger):
            raise click.BadParameter(
                f"expected a PostgreSQL URL (postgresql://USER@HOST[:PORT]/DATABASE, or libpq's "
                f"'host=H dbname=D ...'), got {redact_conninfo(ledger)!r}",
                param_hint="'--ledger'",
            )
        s.ledger = ledger
    one_off = None
    if serial is not None:
        s.serial = str(serial)  # in the history row from the first touch on
        one_off = _one_off(prof, plan, serial, force_serial, s.ledger)
    transport = flash_transport(s.probe)
    bootsel = transport.name == "picoboot"
    # A transport without pyOCD options gets the -O ones only, to refuse: a profile's pack names
    # pyOCD target types, and a device that reports its own chip needs none.
    job = dataclasses.replace(
        s.job,
        plan=plan,
        serial=serial,
        protect=protect,
        boot_check=check,
        session_options=session_options(s, pyocd_options) if transport.tool_options else dict(pyocd_options or {}),
    )
    require(transport, flash_needs(job), "'piflash flash'", hint="flash it through a debug probe for that")
    image = bundle.load_image() if bundle is not None else _load(s)
    rows, got = _list_row(prof, s.ledger)  # before any probe is opened: a used-up list touches no board
    if got is not None:
        job = dataclasses.replace(job, plan=plan.with_row(got.values, got.source))
    count = bundle.count if bundle is not None else None
    turns: list = []

    def call(display, on_connected):
        if got is not None:  # the row becomes this board's for good when programming starts
            from piflash.production.unitlist import ProgrammingMark, forget_row

            display = mark = ProgrammingMark(display, lambda: rows.programming(got.row))
            try:
                return flash_with(display, on_connected)
            except PiflashError as exc:
                if not mark.started:  # given back (_finish_row): not this board's values
                    forget_row(getattr(exc, "result", None), job.plan)
                raise
        return flash_with(display, on_connected)

    def flash_with(display, on_connected):
        def touch(result):
            _placed(on_connected, labgrid_place)(result)
            if one_off is not None:  # committed before the board is programmed
                one_off.take(result.target_uid)
            if count is not None:  # the bundle's count limit: this board's turn, before it is written
                turns.append(count.take(result.target_uid))

        if bootsel:
            from piflash.jobs.bootsel import flash_bootsel

            return flash_bootsel(image, probe=s.probe, target=s.target, job=job, progress=display, on_connected=touch)
        from piflash.jobs.workflow import flash_firmware

        return flash_firmware(image, probe=s.probe, target=s.target, job=job, progress=display, on_connected=touch)

    try:
        result = _run_with_progress(s, quiet, json_mode, call)
    except BaseException as exc:
        interrupted = isinstance(exc, KeyboardInterrupt) or getattr(exc, "exit_code", None) == 130
        _finish(one_off, "interrupted" if interrupted else "fail", getattr(exc, "result", None))
        _finish_row(rows, got, False, getattr(exc, "result", None))
        _settle(count, turns, False)
        raise
    _finish(one_off, "pass", result)
    _settle(count, turns, True)
    _finish_row(rows, got, True, result)
    p = result.program
    verified = "verified" if result.verify else "NOT verified"
    extra = f", serial {result.serial}" if result.serial is not None else ""
    extra += " (RE-ISSUED with --force-serial)" if force_serial and result.serial is not None else ""
    extra += ", read-out protection LOCKED" if result.protection == "locked" and protect else ""
    extra += ", boot check passed" if result.boot_check else ""
    how = f"{result.probe_id}, BOOTSEL" if bootsel else result.probe_id
    _report(
        result,
        json_mode,
        quiet,
        f"Flashed {image.size:,} bytes to {result.target} ({how}): {p.programmed_bytes:,} "
        f"programmed, {p.skipped_bytes:,} unchanged, {verified}{extra}, in {result.duration:.2f} s",
    )


def _is_bundle(firmware: Optional[str]) -> bool:
    from piflash.bundle.loader import is_bundle

    return is_bundle(firmware)


def _open_bundle(firmware, profile, allowed_signers, target, base_address, ledger):
    """Verify the job bundle ``firmware`` (:func:`piflash.bundle.loader.open_bundle`) before anything
    else: a refusal (exit 28) opens no probe and touches no board.

    :raises click.UsageError: no bundle given with --allowed-signers, or a bundle with -p or --base-address.
    :raises BundleError: the bundle is refused (exit 28).
    """
    from piflash.bundle.loader import open_bundle
    from piflash.record.ledger import ledger_url
    from piflash.targets.catalog import check_target

    if not _is_bundle(firmware):
        raise click.UsageError("--allowed-signers goes with a job bundle: give FIRMWARE as JOB.pfb")
    if profile is not None or base_address is not None:
        raise click.UsageError("a job bundle carries its own profile: drop -p/--base-address")
    return open_bundle(firmware, allowed_signers, target=target, ledger=ledger_url(ledger), check_target=check_target)


def _boot_check(prof, text: Optional[str], timeout: Optional[float], reset: bool):
    """The :class:`piflash.production.bootcheck.BootCheck` of this flash: ``--boot-check`` over the
    profile's (``off`` drops it), ``--boot-timeout`` over either's timeout; None for no check.

    :raises click.UsageError: a malformed check, a timeout without a check, or a check with --no-reset.
    """
    import dataclasses

    from piflash.production.bootcheck import parse_boot_check

    check = prof.boot_check if prof is not None else None
    if text is not None and text.strip().lower() == "off":
        check = None
    elif text is not None:
        try:
            check = parse_boot_check(
                text, timeout if timeout is not None else check.timeout if check is not None else None
            )
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="'--boot-check'") from None
    elif timeout is not None:
        if check is None:
            raise click.UsageError(
                "--boot-timeout sets the boot check's wait: give --boot-check too (or a profile with 'boot_check:')"
            )
        check = dataclasses.replace(check, timeout=timeout)
    if check is not None and not reset:
        raise click.UsageError("the boot check runs the firmware the reset starts: --no-reset never starts it")
    return check


def _list_row(prof, ledger: Optional[str]):
    """The row of the profile's list this one board takes (holder ``cli/PID/...``; through the ledger
    with ``--ledger`` or ``PIFLASH_LEDGER``), committed before any probe is opened: returns
    ``(allocator, TakenRow)``, or ``(None, None)`` for a profile without a list.

    :raises ListUsedUpError: (exit 22) no row is left. :raises SerialError: the row database or
        the ledger cannot be used.
    """
    if prof is None or prof.unit_list is None:
        return None, None
    from piflash.production.unitlist import PostgresRowSource, RowAllocator, one_off_holder, recover_one_offs
    from piflash.record.ledger import ledger_url

    url = ledger_url(ledger)

    def source():
        return PostgresRowSource(url) if url else None

    recover_one_offs(prof.unit_list, source_factory=source)  # what one-offs that died left
    rows = RowAllocator(prof.unit_list, one_off_holder(), block=1, source=source())
    try:
        return rows, rows.take(None)
    except BaseException:
        rows.close()
        raise


def _finish_row(rows, got, ok: bool, result) -> None:
    """The one-off's list row: ``pass``/``fail`` once programming started, else given back; a
    database that cannot be written warns (the row stays the board's: never given again)."""
    if rows is None:
        return
    from piflash.errors import SerialError

    try:
        rows.finish(got.row, ok, getattr(result, "target_uid", None))
        rows.release()
    except SerialError as exc:
        click.secho(f"warning: list row {got.row} not marked: {exc.message}", fg="yellow", err=True)
    finally:
        rows.close()


def _settle(count, turns: list, passed: bool) -> None:
    """Settle the board's turn under the bundle's count limit (:class:`piflash.bundle.counts.BoardCount`);
    a ledger that cannot be written warns (the turn expires in the ledger)."""
    for turn in turns:
        try:
            count.settle(turn, passed)
        except PiflashError as exc:
            click.secho(
                f"warning: the board's turn under the bundle's count limit not settled: {exc.message}",
                fg="yellow",
                err=True,
            )


def _finish(one_off, state: str, result) -> None:
    """Record a one-off number's outcome; a serial database that cannot be written warns (the
    number stays ``taken``, so it is still never given again)."""
    if one_off is None:
        return
    try:
        one_off.finish(state, getattr(result, "target_uid", None))
    except PiflashError as exc:
        click.secho(
            f"warning: serial {one_off.n} not marked {state} in the serial database: {exc.message}",
            fg="yellow",
            err=True,
        )


def _one_off(prof, plan, serial: int, force: bool, ledger: Optional[str] = None):
    """Refuse a ``--serial`` number already issued to a board, unless ``force``;
    return the :class:`piflash.production.serials.OneOff` that records this issue in the serial database
    (with a ledger, ``--ledger`` or ``PIFLASH_LEDGER``: a :class:`piflash.production.leases.LedgerOneOff`,
    which records it in the ledger too, so the line's counter never grants it).

    Checked before the firmware is loaded or a probe opened: a refusal touches nothing.

    :raises SerialIssuedError: the number is in the serial database (the counter's or an earlier
        one-off), in a history row of this profile, or, with a ledger, issued on the line (a
        ledger row, a lease of the counter, a one-off there), and ``force`` is not set (exit 25).
    :raises SerialError, HistoryError: the serial database, the history or the ledger cannot be
        read (exit 22, 18): whether the number is free cannot be told.
    """
    from piflash.errors import SerialIssuedError
    from piflash.production.serials import OneOff, find_issued
    from piflash.record.ledger import ledger_url

    counter = plan.counter.name
    found = find_issued(counter, serial, prof.name)
    url = ledger_url(ledger)
    if url:
        from piflash.production.leases import describe_issued, find_issued_in_ledger

        found += find_issued_in_ledger(url, plan.counter, serial, prof.name)
    if found and not force:
        boards = sorted({f["target_uid"] for f in found if f["target_uid"]})
        first = next((f for f in found if f["source"] == "history"), found[0])
        if first["source"] in ("ledger", "lease", "ledger one-off", "counter raise"):
            where = describe_issued(first)
        elif first["source"] == "history":
            where = f"history row {first['row']}: {first['operation']} {first['state'].upper()} at {first['when']}" + (
                f", station {first['station']}" if first["station"] else ""
            )
        else:
            where = f"serial database, counter '{counter}': {first['state']} at {first['when']}, " + (
                f"station {first['holder']}" if first["holder"] != "cli" else "a --serial one-off"
            )
        who = f"board {', '.join(boards)}" if boards else "a board whose unique ID was not read"
        places = "the history, the serial database and the ledger" if url else "the history and the serial database"
        more = f" ({len(found)} records in {places})" if len(found) > 1 else ""
        raise SerialIssuedError(
            f"serial {serial} was already issued: {who} has it; {where}{more}",
            serial=serial,
            issued=found,
            hint=f"take a new number (the station takes them from the counter '{counter}'); "
            f"'piflash history --board {serial}' shows the board. To give it again on purpose "
            f"(the same board flashed again), add --force-serial: it is recorded as a re-issue",
        )
    if url:
        import socket

        from piflash import settings
        from piflash.production.leases import LedgerOneOff

        origin = settings.PIFLASH_STATION.value() or socket.gethostname()
        return LedgerOneOff(plan.counter, serial, url, origin, profile=prof.name, reissue=bool(found))
    return OneOff(counter, serial, reissue=bool(found))


@click.command(epilog=EXIT_CODES_EPILOG, context_settings=CONTEXT)
@firmware_options
@probe_options
@reset_option
@output_options
@handles_errors
@memory_guarded("verify")
def verify(firmware, probe, target, frequency, profile, pyocd_options, base_address, reset, quiet, json_mode):
    """Compare the target's flash with FIRMWARE without writing anything."""
    from piflash.jobs.workflow import verify_firmware

    sigterm_as_interrupt()
    s = resolve(
        profile,
        firmware=firmware,
        probe=probe,
        target=target,
        frequency=frequency,
        base_address=base_address,
        reset=reset,
    )
    image = _load(s)
    from piflash.jobs.transports import PICOBOOT, caps_of

    transport = caps_of(s.probe)
    require_transport(s.probe, ["verify"] + (["reset"] if s.job.reset else []), "verify")
    if transport is PICOBOOT:
        from piflash.jobs.bootsel import verify_bootsel

        result = _run_with_progress(
            s,
            quiet,
            json_mode,
            lambda display, on_connected: verify_bootsel(
                image, s.probe, s.target, reset=s.job.reset, progress=display, on_connected=on_connected
            ),
        )
        _report(
            result,
            json_mode,
            quiet,
            f"Verified: all {image.size:,} bytes match on {result.target} ({result.probe_id}, BOOTSEL)",
        )
        return
    result = _run_with_progress(
        s,
        quiet,
        json_mode,
        lambda display, on_connected: verify_firmware(
            image,
            probe=s.probe,
            target=s.target,
            frequency=s.job.frequency,
            progress=display,
            reset=s.job.reset,
            options=session_options(s, pyocd_options),
            on_connected=on_connected,
        ),
    )
    _report(result, json_mode, quiet, f"Verified: all {image.size:,} bytes match on {result.target}")


@click.command("read", epilog=EXIT_CODES_EPILOG, context_settings=CONTEXT)
@click.argument("output", type=click.Path(dir_okay=False))
@probe_options
@click.option(
    "--range",
    "ranges",
    multiple=True,
    metavar="RANGE",
    help="Read only RANGE: START+SIZE, START-END (end exclusive). Repeatable (.hex, .uf2). "
    "[default: the target's main flash]",
)
@reset_option
@output_options
@handles_errors
@memory_guarded("verify")
def read(output, probe, target, frequency, profile, pyocd_options, ranges, reset, quiet, json_mode):
    """Read the target's flash (or --range of it) into OUTPUT, checked against the flash by CRC32:
    .bin, .hex or .uf2, by OUTPUT's extension. The board is not changed (it is reset afterwards,
    --no-reset leaves it halted)."""
    from piflash.jobs.readback import _checked_output, read_bootsel, read_flash
    from piflash.jobs.transports import PICOBOOT, caps_of

    sigterm_as_interrupt()
    wanted = [_range(r) for r in ranges]
    try:
        _checked_output(output, wanted)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="'OUTPUT'") from None
    s = resolve(profile, probe=probe, target=target, frequency=frequency, reset=reset)
    require_transport(s.probe, ["read"] + (["reset"] if s.job.reset else []), "read")

    def call(display, on_connected):
        if caps_of(s.probe) is PICOBOOT:
            return read_bootsel(
                output, s.probe, s.target, wanted, progress=display, reset=s.job.reset, on_connected=on_connected
            )
        return read_flash(
            output,
            probe=s.probe,
            target=s.target,
            ranges=wanted,
            frequency=s.job.frequency,
            progress=display,
            reset=s.job.reset,
            options=session_options(s, pyocd_options),
            on_connected=on_connected,
        )

    result = _run_with_progress(s, quiet, json_mode, call)
    _report(
        result,
        json_mode,
        quiet,
        f"Read {result.image_bytes:,} bytes of {result.target} into {output} (checked by CRC32)",
    )


def _range(text: str):
    try:
        if "+" in text:
            start, length = (int(v, 0) for v in text.split("+", 1))
            start, end = start, start + length
        elif "-" in text:
            start, end = (int(v, 0) for v in text.split("-", 1))
        else:
            start = int(text, 0)
            end = start + 1
    except ValueError:
        raise click.BadParameter(f"'{text}' is not ADDR, START-END or START+LENGTH") from None
    if end <= start:
        raise click.BadParameter(f"'{text}' is an empty range (END is exclusive, LENGTH must be > 0)")
    return start, end


#: What ``erase --chip`` loses: it is a mass erase on every target piflash knows (nRF NVMC ERASEALL
#: clears "all non-volatile memory including UICR registers", nRF52840 PS v1.7 NVMC ERASEALL;
#: STM32F1 FLASH_CR.MER is the "mass erase", RM0008 3.3.3).
CHIP_ERASE_LOSES = "all of its flash and, on an nRF, the UICR (serial numbers, patches, APPROTECT setting)"


@click.command(epilog=EXIT_CODES_EPILOG, context_settings=CONTEXT)
@probe_options
@click.option(
    "--chip",
    "mode",
    flag_value="chip",
    help="Erase the whole chip: a mass erase, so it asks first on a terminal (--yes without one).",
)
@click.option(
    "--sector",
    "sectors",
    multiple=True,
    metavar="RANGE",
    help="Erase the sectors covering RANGE: ADDR, START-END (end exclusive) or START+LENGTH. Repeatable.",
)
@yes_option
@output_options
@handles_errors
@memory_guarded("erase")
def erase(probe, target, frequency, profile, pyocd_options, mode, sectors, yes, quiet, json_mode):
    """Erase the whole chip (--chip) or the sectors covering the given ranges (--sector): one of
    the two must be given, as with 'pyocd erase'."""
    from piflash.jobs.workflow import erase_target

    sigterm_as_interrupt()
    if mode == "chip" and sectors:
        raise click.UsageError("--chip and --sector exclude each other")
    if mode is None and not sectors:
        raise click.UsageError(
            "say what to erase: --chip (the whole chip, a mass erase) or --sector RANGE (e.g. --sector 0x8000+0x1000)"
        )
    ranges = [_range(r) for r in sectors]
    s = resolve(profile, probe=probe, target=target, frequency=frequency)
    require_transport(
        s.probe,
        ["sector_erase" if ranges else "chip_erase"],
        "erase " + ("--sector" if ranges else "--chip"),
        "a flash erases what it must change",
    )
    if mode == "chip":
        confirm_mass_erase(CHIP_ERASE_LOSES, yes, "erase --chip")
    from piflash.jobs.transports import PICOBOOT, flash_transport

    if flash_transport(s.probe) is PICOBOOT:  # named, or the only thing attached (both: exit 8)
        from piflash.jobs.bootsel import erase_bootsel

        result = _run_with_progress(
            s,
            quiet,
            json_mode,
            lambda display, on_connected: erase_bootsel(
                s.probe, s.target, "sector" if ranges else "chip", ranges, display, on_connected
            ),
        )
        _report(result, json_mode, quiet, f"Erased {result.program.erased_bytes:,} bytes on {result.target}")
        return
    result = _run_with_progress(
        s,
        quiet,
        json_mode,
        lambda display, on_connected: erase_target(
            s.probe,
            s.target,
            "sector" if ranges else "chip",
            ranges,
            s.job.frequency,
            display,
            session_options(s, pyocd_options),
            on_connected=on_connected,
        ),
    )
    _report(result, json_mode, quiet, f"Erased {result.program.erased_bytes:,} bytes on {result.target}")


@click.command(epilog=EXIT_CODES_EPILOG, context_settings=CONTEXT)
@probe_options
@click.option("--halt", is_flag=True, help="Halt at the reset vector instead of running.")
@labgrid_place_option
@output_options
@handles_errors
@memory_guarded("reset")
def reset(probe, target, frequency, profile, pyocd_options, halt, labgrid_place, quiet, json_mode):
    """Reset the target."""
    from piflash.jobs.workflow import reset_board

    sigterm_as_interrupt()
    s = resolve(profile, probe=probe, target=target, frequency=frequency)
    from piflash.jobs.transports import PICOBOOT, caps_of

    require_transport(s.probe, ["reset_halt" if halt else "reset"], "reset --halt" if halt else "reset")
    if caps_of(s.probe) is PICOBOOT:
        from piflash.jobs.bootsel import reset_bootsel

        result = _recorded(
            s, lambda on_connected: reset_bootsel(s.probe, on_connected=_placed(on_connected, labgrid_place))
        )
        _report(result, json_mode, quiet, f"Rebooted {result.target} ({result.probe_id}) into its flash")
        return
    result = _recorded(
        s,
        lambda on_connected: reset_board(
            s.probe,
            s.target,
            halt,
            s.job.frequency,
            session_options(s, pyocd_options),
            on_connected=_placed(on_connected, labgrid_place),
        ),
    )
    _report(result, json_mode, quiet, f"Reset {result.target}" + (" (halted)" if halt else ""))
