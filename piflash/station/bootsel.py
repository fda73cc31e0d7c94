"""A station slot that flashes Picos in USB BOOTSEL mode, no probe (``probes: ["picoboot:1-1.2"]``).

A slot is a USB port (a hub port with pogo pins on a Pico's USB and BOOTSEL pads): its probe ID is
``picoboot:PORT-PATH`` (:mod:`piflash.probe.picoboot`). :class:`BootselWorker` runs the loop of
:class:`~piflash.station.worker.ProbeWorker` over the PICOBOOT transport:

1. **wait for a board**: every ``poll_interval`` seconds look for a BOOTSEL device on the port;
2. **flash**: open it (:func:`piflash.jobs.bootsel.bootsel_session`: its flash's unique ID
   read by piflash's helper on the chip), open the history row, take a serial number when the
   profile numbers its boards (committed before anything is written), lay the patch bytes in,
   then :func:`~piflash.jobs.bootsel.flash_bootsel_session` (erase what must change, program,
   verify by CRC, reboot into the firmware). With ``on_same_firmware: skip`` a board that
   already holds the image (nothing to erase or write) is recorded as ``skip``;
3. **record** it as the probe workers do (the same history calls, PASS / SKIP / FAIL);
4. **wait for removal**: the reboot makes the device leave the bus; a board left in BOOTSEL mode
   (a failed flash, or ``reset: false``) is waited for until it is unplugged, so it is flashed
   once, not in a loop.

A device that leaves the bus mid-flash is recorded as ``fail`` (exit-code kind ProbeLostError)
with what had been done; nothing else is lost. The options a profile has that PICOBOOT does not
do (chip erase, lock, boot check) are refused when the slot starts, in its status line, by
:mod:`piflash.jobs.transports`.
"""

from __future__ import annotations

import logging
from typing import Optional

from piflash.errors import PiflashError, ProbeLostError, SerialError
from piflash.jobs.bootsel import (
    bootsel_image,
    bootsel_session,
    flash_bootsel_session,
    reached_board,
)
from piflash.jobs.workflow import tracking
from piflash.probe import picoboot
from piflash.production.serials import checkpoint
from piflash.progress import ProgressSink
from piflash.record.result import OperationResult
from piflash.station.worker import (
    ProbeWorker,
    StationSink,
    flash_options,
    serial_allocator,
)

LOG = logging.getLogger(__name__)

__all__ = ["BootselWorker", "unsupported", "worker_class"]


def worker_class(uid: str):
    """The worker class for probe ID ``uid``: :class:`BootselWorker` for ``picoboot:...``."""
    from piflash.jobs.transports import PICOBOOT, caps_of

    return BootselWorker if caps_of(uid) is PICOBOOT else ProbeWorker


def unsupported(config) -> Optional[str]:
    """Why the slot does not serve boards, or None: what the station config (its profile's erase
    mode, boot check, the lock) asks that PICOBOOT does not do, in the words of
    :func:`piflash.jobs.transports.refusal`, the one place that decides it.

    :param config: the loaded :class:`piflash.station.config.StationConfig`.
    """
    from piflash.jobs.transports import PICOBOOT, flash_needs, refusal

    err = refusal(PICOBOOT, flash_needs(flash_options(config)), "the station's profile")
    return err.message if err is not None else None


class BootselWorker(ProbeWorker):
    """Serves one USB port where Picos arrive in BOOTSEL mode (see the module)."""

    def _present(self) -> bool:
        try:
            return any(d.probe_id == self.uid or picoboot.device_named(d, self.uid) for d in picoboot.list_devices())
        except Exception as exc:  # a USB error while listing: look again later
            LOG.debug("slot %s: listing BOOTSEL devices failed: %s", self.uid, exc)
            return False

    def _one_board(self) -> None:
        loaded = self.station.loaded
        cfg = loaded.config
        refused = unsupported(cfg)
        if refused:
            self._set("waiting_probe", f"not served: {refused}")
            self._sleep(max(1.0, cfg.poll_interval))
            return
        while not self._present():
            if self.stopping():
                return
            self._set("waiting", "waiting for a Pico in BOOTSEL mode")
            self._sleep(cfg.poll_interval)
        if self.stopping():
            return
        self._serve_board(loaded)
        while not self.stopping() and self._present():  # a board that did not reboot
            self._sleep(cfg.poll_interval)
        if not self.stopping():
            self._set("waiting", "waiting for a Pico in BOOTSEL mode")

    def _serve_board(self, loaded) -> None:
        cfg, image = loaded.config, loaded.image
        prof = cfg.profile
        result = OperationResult.start("flash", image, self.uid, prof.target)
        row = [None]
        outcome = "fail"
        serial: Optional[int] = None
        taken: list = []
        alloc = None

        def touch(res: OperationResult) -> None:  # before anything is written to the board
            row[0] = self.station.open_row(res, self.uid)

        try:
            with tracking(result):
                with bootsel_session(
                    self.uid, result, ProgressSink(), touch, prof.target, image, reboot_running=False
                ) as conn:
                    if row[0] is None:
                        raise _NoHistory()
                    uid = result.target_uid
                    board_image = image
                    plan = prof.patch_plan
                    if plan is not None:
                        if plan.uses_serial:
                            alloc = serial_allocator(cfg, getattr(self.station, "serial_holder", None))
                            serial = alloc.take(uid, lambda n: (taken.append(n), self.station.note_serial(row[0], n)))
                        board_image = bootsel_image(result, image, plan, serial)
                    flash_bootsel_session(
                        conn,
                        board_image,
                        result,
                        StationSink(self, uid, serial=result.serial),
                        flash_options(cfg, serial),
                    )
                    p = result.program
                    nothing = p.erased_bytes == 0 and p.programmed_bytes == 0
                    outcome = "skip" if nothing and cfg.on_same_firmware == "skip" else "pass"
        except _NoHistory:
            self._set(
                "fail",
                f"FAIL {result.target_uid or 'unknown'} not flashed: the history cannot be written",
                result.target_uid,
            )
            return
        except PiflashError as exc:
            outcome = "fail"
            if row[0] is None and not reached_board(exc):
                self._set("waiting", f"cannot open the BOOTSEL device: {exc.message}")
                LOG.info("slot %s: %s", self.uid, exc.message)
                self._sleep(max(1.0, cfg.poll_interval))
                return
            if isinstance(exc, ProbeLostError):
                result.error["message"] = f"board left the USB bus during {result.phase}: {exc.message}"
        finally:
            if taken and alloc is not None:
                try:
                    alloc.finish(taken[0], outcome == "pass", result.target_uid)
                except SerialError as exc:
                    LOG.error(
                        "serial %s of board %s not marked %s: %s", taken[0], result.target_uid, outcome, exc.message
                    )
        if row[0] is None:
            return
        if result.error is None and outcome == "fail":
            result.error = {
                "kind": "InternalError",
                "message": "internal error in the station (see its log)",
                "exit_code": 1,
            }
        done = self.station.complete_row(row[0], result, outcome)
        checkpoint("recorded")
        shown = result.target_uid or "unknown"
        tag = f" serial {result.serial}" if result.serial is not None else ""
        if outcome == "fail":
            reason = " ".join(str(result.error.get("message", "")).split())
            self._set("fail", f"FAIL {shown}{tag} {reason}", result.target_uid, error=result.error, row=done)
        else:
            number = f"#{done}" if done is not None else "(not recorded)"
            self._set(outcome, f"{outcome.upper()} {shown} {number}{tag}", result.target_uid, row=done)


class _NoHistory(Exception):
    """The board's history row could not be opened: the board is left alone."""
