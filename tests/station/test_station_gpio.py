"""The station's GPIO output (LEDs, buzzer, start button) on gpiozero's mock pins."""

from __future__ import annotations

import threading

import pytest

gpiozero = pytest.importorskip("gpiozero")

from gpiozero import Device  # noqa: E402
from gpiozero.pins.mock import MockFactory  # noqa: E402

from piflash.station.status import GpioOutput, StatusBoard  # noqa: E402

PINS = {"pass_led": 17, "fail_led": 27, "busy_led": 22, "buzzer": 23, "button": 24}


@pytest.fixture
def factory():
    old = Device.pin_factory
    Device.pin_factory = MockFactory()
    yield Device.pin_factory
    Device.pin_factory.reset()
    Device.pin_factory = old


def test_leds_follow_the_probe_state(factory):
    gpio = GpioOutput(PINS)
    board = StatusBoard([gpio])
    pin = factory.pin
    board.set("sim:a", "flashing", "flashing 0%", "00aa")
    assert pin(22).state and not pin(17).state and not pin(27).state
    board.set("sim:a", "pass", "PASS 00aa #1", "00aa")
    assert not pin(22).state and pin(17).state and not pin(27).state
    board.set("sim:a", "waiting", "waiting for board")
    assert not pin(17).state and not pin(27).state
    board.set("sim:a", "flashing", "flashing 0%", "00bb")
    board.set("sim:a", "fail", "FAIL 00bb verify failed", "00bb")
    assert pin(27).state and not pin(17).state and not pin(22).state
    assert board.counts == {"pass": 1, "fail": 1, "skip": 0}
    board.close()


def test_start_button_releases_a_waiting_board(factory):
    gpio = GpioOutput(PINS)
    assert gpio.has_button
    stop = threading.Event()
    before = gpio.presses()
    pressed = []
    waiter = threading.Thread(target=lambda: pressed.append(gpio.wait_for_press(before, stop)))
    waiter.start()
    factory.pin(24).drive_low()            # the button pulls the pin to GND
    waiter.join(10)
    assert pressed == [True] and gpio.presses() == before + 1
    stop.set()                             # a stop ends a wait without a press
    assert gpio.wait_for_press(gpio.presses(), stop) is False
    gpio.close()


def test_config_with_gpio_but_no_gpiozero_is_a_clear_error(monkeypatch):
    import builtins

    from piflash.errors import PiflashError

    real_import = builtins.__import__

    def no_gpiozero(name, *args, **kwargs):
        if name == "gpiozero":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_gpiozero)
    with pytest.raises(PiflashError, match="gpiozero is not installed") as err:
        GpioOutput({"pass_led": 17})
    assert "piflash[gpio]" in err.value.hint
