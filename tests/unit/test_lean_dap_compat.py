"""piflash's lean CMSIS-DAP link builds on pyOCD internals (pyocd/probe/pydapaccess): these tests fail
on a pyOCD whose internals differ from the ones piflash/probe/lean_dap.py was written against, so
an upgrade is a decision, not a surprise."""

from __future__ import annotations

import importlib.metadata
import inspect
import re
from pathlib import Path

import tomllib

from piflash.probe import lean_dap

REPO = Path(__file__).resolve().parents[2]


def test_pyproject_pins_the_pyocd_series_lean_dap_was_written_for():
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    (pin,) = [d for d in deps if re.match(r"pyocd\b", d)]
    major, minor = lean_dap.PYOCD_SERIES
    assert pin == "pyocd>=%d.%d,<%d.%d" % (major, minor, major, minor + 1)
    installed = tuple(int(x) for x in importlib.metadata.version("pyocd").split(".")[:2])
    assert installed == lean_dap.PYOCD_SERIES


def _params(func):
    return list(inspect.signature(func).parameters)


def test_the_link_internals_used_are_there():
    from pyocd.probe.pydapaccess.dap_access_api import DAPAccessIntf
    from pyocd.probe.pydapaccess.dap_access_cmsis_dap import DAPAccessCMSISDAP

    # The calls LeanLink replaces, with pyOCD's signatures (CMSISDAPProbe calls them so).
    assert _params(DAPAccessCMSISDAP.write_reg) == ["self", "reg_id", "value", "dap_index"]
    assert _params(DAPAccessCMSISDAP.read_reg) == ["self", "reg_id", "dap_index", "now"]
    assert _params(DAPAccessCMSISDAP.reg_write_repeat) == ["self", "num_repeats", "reg_id", "data_array", "dap_index"]
    assert _params(DAPAccessCMSISDAP.reg_read_repeat) == ["self", "num_repeats", "reg_id", "dap_index", "now"]
    for name in ("flush", "identify", "connect", "get_swo_status", "_init_deferred_buffers", "_abort_all_transfers"):
        assert callable(getattr(DAPAccessCMSISDAP, name)), name
    # The state it reads, set by pyOCD's constructor and open().
    src = inspect.getsource(DAPAccessCMSISDAP)
    for attr in ("_packet_size", "_packet_count", "_deferred_transfer", "_lock", "_interface", "_unique_id",
                 "_commands_to_read", "_cached_info"):
        assert "self.%s" % attr in src, attr
    assert [r.value for r in DAPAccessIntf.REG] == list(range(8))
    for name in ("TransferFaultError", "TransferTimeoutError", "TransferError", "TransferProtocolError", "DeviceError"):
        assert issubclass(getattr(DAPAccessIntf, name), DAPAccessIntf.Error)


def test_the_interface_internals_used_are_there():
    from pyocd.probe.pydapaccess.interface.pyusb_backend import PyUSB
    from pyocd.probe.pydapaccess.interface.pyusb_v2_backend import PyUSBv2

    for cls in (PyUSBv2, PyUSB):
        src = inspect.getsource(cls)
        for attr in ("ep_out", "ep_in", "dev", "intf_number", "serial_number", "packet_size", "read_sem"):
            assert "self.%s" % attr in src, (cls.__name__, attr)
        assert _params(cls.__init__) == ["self", "dev"]
        assert isinstance(cls.DEFAULT_USB_TIMEOUT_MS, int)
        for name in ("open", "close", "write", "read", "set_packet_size"):
            assert callable(getattr(cls, name)), name
    assert PyUSBv2.is_bulk is not None


def test_the_probe_internals_used_are_there():
    from pyocd.probe.cmsis_dap_probe import CMSISDAPProbe

    assert _params(CMSISDAPProbe.__init__) == ["self", "device"]
    assert _params(CMSISDAPProbe.write_ap_multiple) == ["self", "addr", "values"]
    assert _params(CMSISDAPProbe.read_ap_multiple) == ["self", "addr", "count", "now"]
    for name in ("REG_ADDR_TO_ID_MAP", "AP", "A32", "_convert_exception"):
        assert hasattr(CMSISDAPProbe, name), name
    assert "self._link = device" in inspect.getsource(CMSISDAPProbe.__init__)


def test_the_pyusb_internals_used_are_there():
    """The lean interface writes and reads through the device's resource manager (its backend and
    open handle), the calls pyusb's own Device.read/write end in."""
    import usb.backend
    import usb.core

    src = inspect.getsource(usb.core._ResourceManager)
    assert "self.backend = backend" in src and "self.handle" in src
    assert "self._ctx = _ResourceManager(" in inspect.getsource(usb.core.Device.__init__)
    for name in ("bulk_read", "bulk_write", "intr_read", "intr_write"):
        params = _params(getattr(usb.backend.IBackend, name))
        assert params[:4] == ["self", "dev_handle", "ep", "intf"] and params[5:] == ["timeout"], name
