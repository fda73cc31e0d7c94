""":class:`PiflashStrategy`: a board from off to flashed to booted, labgrid's ``Strategy``."""

from __future__ import annotations

import enum

import attr
from labgrid.factory import target_factory
from labgrid.step import step
from labgrid.strategy.common import Strategy, StrategyError, never_retry


class Status(enum.Enum):
    """The strategy's states: ``off`` (no driver active; powered off when the target has a
    ``PowerProtocol``), ``flashed`` (the image programmed, verified, the board reset), ``booted``
    (its firmware passed the boot check)."""

    unknown = 0
    off = 1
    flashed = 2
    booted = 3


@target_factory.reg_driver
@attr.s(eq=False)
class PiflashStrategy(Strategy):
    """off -> flashed -> booted through :class:`~piflash.labgrid.driver.PiflashDriver` and
    :class:`~piflash.labgrid.driver.PiflashBootDriver`; a ``PowerProtocol`` driver, when the
    target has one, switches the board off and on.

    Args:
        image (str): the key of the environment's ``images:`` flashed on the way to ``flashed``
            (default ``firmware``).
    """

    bindings = {
        "flasher": "PiflashDriver",
        "boot": "PiflashBootDriver",
        "power": {"PowerProtocol", None},
    }

    image = attr.ib(default="firmware", validator=attr.validators.instance_of(str))
    status = attr.ib(default=Status.unknown)

    @never_retry
    @step(args=["status"])
    def transition(self, status, *, step):  # noqa: B008 (labgrid's step passes itself)
        """Bring the board to ``status`` (a :class:`Status` or its name).

        :raises StrategyError: ``unknown``, or a flash or boot check failed (raised from
            :class:`~piflash.labgrid.driver.PiflashRunError`; the strategy is then broken, as
            labgrid's ``never_retry`` makes every strategy).
        """
        if not isinstance(status, Status):
            status = Status[status]
        if status == Status.unknown:
            raise StrategyError(f"can not transition to {status}")
        if status == self.status:
            step.skip("nothing to do")
            return
        if status == Status.off:
            self.target.deactivate(self.boot)
            self.target.deactivate(self.flasher)
            if self.power:
                self.target.activate(self.power)
                self.power.off()
        elif status == Status.flashed:
            self.transition(Status.off)
            if self.power:
                self.power.on()
            self.target.activate(self.flasher)
            self.flasher.load(self.target.env.config.get_image_path(self.image) if self.target.env else None)
        elif status == Status.booted:
            if self.status != Status.flashed:
                self.transition(Status.flashed)
            self.target.activate(self.boot)
            self.boot.boot()
        self.status = status

    @never_retry
    @step(args=["status"])
    def force(self, status, *, step):
        """Take the board to be in ``status`` without acting (activates the drivers it needs)."""
        if not isinstance(status, Status):
            status = Status[status]
        if status == Status.unknown:
            raise StrategyError(f"can not force state {status}")
        if status in (Status.flashed, Status.booted):
            self.target.activate(self.flasher)
        if status == Status.booted:
            self.target.activate(self.boot)
        self.status = status
