"""The labgrid drivers: :class:`PiflashDriver` (``BootstrapProtocol``, ``ResetProtocol``) and
:class:`PiflashBootDriver` (the boot check).

Each runs ``piflash flash``/``piflash reset`` with ``--json`` where the probe is, as labgrid's
``OpenOCDDriver`` runs openocd (``labgrid/driver/openocddriver.py``): the image is moved with
labgrid's ``ManagedFile`` (``sync_to_resource``: over SSH into ``/var/cache/labgrid/USER/SHA256/``
on the exporter, or used in place when the exporter sees the same file), and the command goes
through the resource's ``wrap_command`` (a :class:`~piflash.labgrid.resource.NetworkPiflashProbe`
prefixes labgrid's SSH connection to its ``host``; a local
:class:`~piflash.labgrid.resource.PiflashProbe` runs it as is). The history row piflash writes
there carries the place (``--labgrid-place``, docs/result.md). The ``piflash`` executable is the
environment's ``tools: {piflash: PATH}``, else ``piflash`` on the PATH.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any, Dict, List, Optional

import attr
from labgrid.driver.common import Driver
from labgrid.driver.exception import ExecutionError
from labgrid.factory import target_factory
from labgrid.protocol import BootstrapProtocol, ResetProtocol
from labgrid.step import step
from labgrid.util.managedfile import ManagedFile

from piflash.errors import PiflashError

#: Seconds a ``piflash`` run may take before the driver gives up on it (a flash of a 2 MiB RP2040
#: image through a slow probe is well under a minute; piflash bounds its own waits besides).
RUN_TIMEOUT_S = 600.0

#: How much of the board's RTT/semihosting output a failure message quotes (the end of it).
OUTPUT_SHOWN = 2000


class PiflashRunError(ExecutionError):
    """A ``piflash`` run on the probe's host failed. ``msg`` names the probe, the place, the
    phase, piflash's error and hint and the board's output so far; ``result`` is piflash's
    ``--json`` object (docs/result.md; ``{}`` when it printed none) and ``exit_code`` its exit
    status (docs/exit-codes.md; None when it did not end)."""

    def __init__(
        self,
        msg: str,
        stdout: Optional[List[str]] = None,
        stderr: Optional[List[str]] = None,
        result: Optional[Dict[str, Any]] = None,
        exit_code: Optional[int] = None,
    ) -> None:
        super().__init__(msg, stdout, stderr)
        self.result: Dict[str, Any] = result or {}
        self.exit_code = exit_code

    def __str__(self) -> str:
        return str(self.msg)


def _place_of(target) -> Optional[str]:
    """The labgrid place ``target`` stands for (its ``RemotePlace`` resource's name), or None."""
    for resource in getattr(target, "resources", []):
        if type(resource).__name__ == "RemotePlace":
            return str(resource.name)
    return None


def describe_failure(
    what: str, probe_id: str, place: Optional[str], exit_code: int, result: Dict[str, Any], stderr: str
) -> str:
    """The one message of a failed run: ``what`` (``"piflash flash app.elf"``) on ``probe_id``
    (and ``place``) failed in phase P with exit N: piflash's message, its hint, then the board's
    output so far (the boot check's ``output``, its last :data:`OUTPUT_SHOWN` characters) or
    piflash's stderr when it printed no JSON."""
    where = f"{probe_id}" + (f" (labgrid place {place})" if place else "")
    error = result.get("error") or {}
    text = f"{what} on {where} failed"
    if result.get("phase"):
        text += f" in phase {result['phase']}"
    text += f" (exit {exit_code})"
    if error.get("message"):
        text += f": {error['message']}"
    elif stderr.strip():
        text += f": {stderr.strip()[-OUTPUT_SHOWN:]}"
    if error.get("hint"):
        text += f"\nhint: {error['hint']}"
    boot = result.get("boot_check") or {}
    output = boot.get("output")
    if output is not None:
        text += f"\nboard output so far ({len(output)} characters): {output[-OUTPUT_SHOWN:]!r}"
    return text


@target_factory.reg_driver
@attr.s(eq=False)
class PiflashDriver(Driver, BootstrapProtocol, ResetProtocol):
    """Flash (``load``: program, verify, reset) and reset a board through piflash.

    Args:
        pyocd_target (str, optional): pyOCD's target type (``nrf52840``), ``piflash -t``; a
            ``sim:`` probe names its own. (labgrid gives every driver its ``Target`` as
            ``target``, so the chip's type cannot have that name here.)
        profile (str, optional): a piflash profile's name or path on the probe's host, ``-p``.
        image (str, optional): the key of the environment's ``images:`` that ``load()`` flashes
            when given no file.
        base_address (int, optional): where a ``.bin`` file goes, ``--base-address`` (a ``.bin``
            carries no address; pyOCD's test binaries are ``.bin`` files at 0 on nRF52).
    """

    bindings = {"probe": {"PiflashProbe", "NetworkPiflashProbe"}}

    pyocd_target = attr.ib(default=None, validator=attr.validators.optional(attr.validators.instance_of(str)))
    profile = attr.ib(default=None, validator=attr.validators.optional(attr.validators.instance_of(str)))
    image = attr.ib(default=None, validator=attr.validators.optional(attr.validators.instance_of(str)))
    base_address = attr.ib(default=None, validator=attr.validators.optional(attr.validators.instance_of(int)))

    def __attrs_post_init__(self):
        super().__attrs_post_init__()
        self.tool = self.target.env.config.get_tool("piflash") if self.target.env else "piflash"
        #: the last image flashed, on the probe's host (its ManagedFile's remote path)
        self.last_image: Optional[str] = None
        #: piflash's ``--json`` object of the last run
        self.last_result: Dict[str, Any] = {}

    @property
    def place(self) -> Optional[str]:
        """The labgrid place of this target (recorded in the history row), or None locally."""
        return _place_of(self.target)

    def _common(self) -> List[str]:
        args = ["-u", self.probe.probe_id]
        if self.pyocd_target:
            args += ["-t", self.pyocd_target]
        if self.profile:
            args += ["-p", self.profile]
        return args

    def run_piflash(self, args: List[str], what: str) -> Dict[str, Any]:
        """Run ``piflash ARGS --json -q`` where the probe is and return its JSON object.

        Through ``subprocess.run``, not labgrid's ``processwrapper.check_output`` (which
        ``OpenOCDDriver`` uses): that one joins stdout and stderr on one pty and waits without a
        bound, and the result is read from piflash's JSON on stdout.

        :raises PiflashRunError: piflash exited non-zero (its message, hint, phase and the
            board's output in the message), printed no JSON, or ran longer than
            :data:`RUN_TIMEOUT_S` seconds.
        """
        cmd = self.probe.wrap_command([self.tool, *args, "--json", "-q"])
        self.logger.debug("running %s", cmd)
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise PiflashRunError(f"{what} on {self.probe.probe_id} ran longer than {RUN_TIMEOUT_S:g} s") from None
        try:
            result = json.loads(proc.stdout) if proc.stdout.strip() else {}
        except ValueError:
            result = {}
        self.last_result = result
        if proc.returncode != 0 or not result.get("ok"):
            raise PiflashRunError(
                describe_failure(what, self.probe.probe_id, self.place, proc.returncode, result, proc.stderr),
                proc.stdout.splitlines(),
                proc.stderr.splitlines(),
                result,
                proc.returncode,
            )
        return result

    def sync_image(self, filename: str) -> str:
        """Put ``filename`` where the probe is (labgrid's ``ManagedFile``) and return its path there."""
        managed = ManagedFile(filename, self.probe)
        managed.sync_to_resource()
        return managed.get_remote_path()

    def flash(self, filename: Optional[str] = None, extra: Optional[List[str]] = None) -> Dict[str, Any]:
        """Flash ``filename`` (else the environment's image ``image``): program, verify, reset,
        with ``extra`` arguments to ``piflash flash``; returns piflash's result object.

        :raises PiflashRunError: as :meth:`run_piflash`.
        :raises FileNotFoundError: no such local file (labgrid's ``ManagedFile``).
        """
        if filename is None:
            if self.image is None or self.target.env is None:
                raise PiflashRunError("PiflashDriver.load() needs a file, or the driver's 'image' and an environment")
            filename = self.target.env.config.get_image_path(self.image)
        remote = self.sync_image(filename)
        result = self.run_piflash(self.flash_args(remote) + list(extra or []), f"piflash flash {remote}")
        self.last_image = remote
        return result

    def flash_args(self, remote: str) -> List[str]:
        """``piflash flash``'s arguments for the file ``remote`` (a path where the probe is)."""
        args = ["flash", remote, *self._common()]
        if self.base_address is not None and remote.lower().endswith(".bin"):
            args += ["--base-address", hex(self.base_address)]
        if self.place:
            args += ["--labgrid-place", self.place]
        return args

    @Driver.check_active
    @step(args=["filename"])
    def load(self, filename=None):
        """BootstrapProtocol: flash, verify and reset (:meth:`flash`); returns piflash's result."""
        return self.flash(filename)

    @Driver.check_active
    @step()
    def reset(self):
        """ResetProtocol: ``piflash reset`` (the board runs afterwards); returns piflash's result.

        :raises PiflashRunError: as :meth:`run_piflash`.
        """
        args = ["reset", *self._common()] + (["--labgrid-place", self.place] if self.place else [])
        return self.run_piflash(args, "piflash reset")


@target_factory.reg_driver
@attr.s(eq=False)
class PiflashBootDriver(Driver):
    """The boot check of a board :class:`PiflashDriver` flashes: piflash's ``--boot-check``
    (docs/boot-check.md) after the reset.

    Args:
        check (str): ``rtt:REGEX``, ``semihost:STATUS`` or ``word:ADDR=VALUE``; checked when the
            environment is read (:func:`piflash.production.bootcheck.parse_boot_check`).
        timeout (float): seconds the check waits, as ``--boot-timeout`` (default 3).
    """

    bindings = {"flasher": "PiflashDriver"}

    check = attr.ib(validator=attr.validators.instance_of(str))
    timeout = attr.ib(default=3.0, converter=float)

    def __attrs_post_init__(self):
        super().__attrs_post_init__()
        from piflash.production.bootcheck import parse_boot_check

        try:
            parse_boot_check(self.check, self.timeout)
        except (PiflashError, ValueError) as exc:  # parse_boot_check raises ValueError for the syntax
            raise ValueError(f"PiflashBootDriver check {self.check!r}: {exc}") from None
        #: the boot check object (piflash's result ``boot_check``) of the last check
        self.last_boot: Dict[str, Any] = {}

    @Driver.check_active
    @step(args=["filename"])
    def boot(self, filename=None):
        """Flash ``filename`` (else the image the flasher flashed last, else its ``image``),
        reset, and check the boot; returns piflash's ``boot_check`` object. An unchanged image
        is not written again (piflash's plan skips unchanged pages), so after
        :meth:`PiflashDriver.load` this costs a connect, a CRC pass, the reset and the check.

        :raises PiflashRunError: the check failed (exit 26: the message quotes the board's
            output so far) or the flash did.
        """
        extra = ["--boot-check", self.check, "--boot-timeout", f"{self.timeout:g}"]
        if filename is None and self.flasher.last_image is not None:
            remote = self.flasher.last_image
            args = self.flasher.flash_args(remote) + extra
            result = self.flasher.run_piflash(args, f"piflash flash {remote} --boot-check {self.check}")
        else:
            result = self.flasher.flash(filename, extra)
        self.last_boot = result.get("boot_check") or {}
        return self.last_boot
