"""The errors come in layers (piflash.errors): every concrete error under one layer, so that a
caller can catch "any probe error"; the layers change no exit code and no ``kind``."""

from __future__ import annotations

import pytest

from piflash import errors
from piflash.errors import ExitCode, PiflashError

#: Every concrete error: (its layer, its exit code). The codes are docs/exit-codes.md's.
CONCRETE = {
    "NoProbeError": ("ProbeError", ExitCode.NO_PROBE),
    "SeveralProbesError": ("ProbeError", ExitCode.SEVERAL_PROBES),
    "ProbePermissionError": ("ProbeError", ExitCode.PERMISSION),
    "ProbeLostError": ("ProbeError", ExitCode.PROBE_LOST),
    "ProbeTimeoutError": ("ProbeError", ExitCode.PROBE_TIMEOUT),
    "ProbeBusyError": ("ProbeError", ExitCode.PROBE_BUSY),
    "ProbeSyntaxError": ("ProbeError", ExitCode.USAGE),
    "UnsupportedError": ("ProbeError", ExitCode.USAGE),
    "ConnectError": ("TargetError", ExitCode.CONNECT),
    "WrongTargetError": ("TargetError", ExitCode.CONNECT),
    "UnknownTargetError": ("TargetError", ExitCode.USAGE),
    "TargetRequiredError": ("TargetError", ExitCode.USAGE),
    "PackError": ("TargetError", ExitCode.USAGE),
    "ProtectedError": ("TargetError", ExitCode.PROTECTED),
    "FlashError": ("TargetError", ExitCode.FLASH),
    "PicobootError": ("TargetError", ExitCode.FLASH),
    "VerifyError": ("TargetError", ExitCode.VERIFY),
    "RttError": ("TargetError", ExitCode.BOOT_CHECK),
    "FirmwareError": ("ImageError", ExitCode.FIRMWARE),
    "ImageRangeError": ("ImageError", ExitCode.IMAGE_RANGE),
    "ChecksumError": ("ImageError", ExitCode.CHECKSUM),
    "BundleError": ("ImageError", ExitCode.BUNDLE),
    "ProfileError": ("ConfigError", ExitCode.PROFILE),
    "UnknownOptionError": ("ConfigError", ExitCode.USAGE),
    "GuardConfigError": ("ConfigError", ExitCode.USAGE),
    "ProtectError": ("ProductionError", ExitCode.PROTECT_FAILED),
    "SerialError": ("ProductionError", ExitCode.SERIAL),
    "ListUsedUpError": ("ProductionError", ExitCode.SERIAL),
    "SerialIssuedError": ("ProductionError", ExitCode.SERIAL_ISSUED),
    "BootCheckError": ("ProductionError", ExitCode.BOOT_CHECK),
    "HistoryError": ("RecordError", ExitCode.HISTORY),
    "HistoryChainError": ("RecordError", ExitCode.HISTORY_CHAIN),
    "LedgerError": ("RecordError", ExitCode.LEDGER),
    "LedgerConflictError": ("RecordError", ExitCode.LEDGER),
    "MemoryGuardError": ("HostError", ExitCode.MEMORY),
    "ServiceError": ("HostError", ExitCode.SERVICE),
    "StationDownError": ("HostError", ExitCode.STATION_DOWN),
    "ExtraMissingError": ("HostError", ExitCode.EXTRA_MISSING),
    "SetupError": ("HostError", ExitCode.INTERNAL),
    "NeedsRootError": ("HostError", ExitCode.PERMISSION),
    "UnknownUserError": ("HostError", ExitCode.USAGE),
}
LAYERS = {"ProbeError", "TargetError", "ImageError", "ConfigError", "ProductionError", "RecordError",
          "HostError"}
#: No layer's: an interrupt can come in any of them.
LAYERLESS = {"OperationInterrupted": ExitCode.INTERRUPTED}


def _all_errors():
    return {name: obj for name, obj in vars(errors).items()
            if isinstance(obj, type) and issubclass(obj, PiflashError) and obj is not PiflashError}


def test_every_error_is_listed_here():
    assert set(_all_errors()) == set(CONCRETE) | LAYERS | set(LAYERLESS)


def test_the_layers_sit_directly_under_the_base_and_nothing_else_but_interrupts_does():
    direct = {name for name, cls in _all_errors().items() if cls.__bases__ == (PiflashError,)}
    assert direct == LAYERS | set(LAYERLESS)
    layers = [getattr(errors, name) for name in LAYERS]
    for a in layers:                 # the layers do not overlap
        assert not any(issubclass(a, b) for b in layers if b is not a)


@pytest.mark.parametrize("name", sorted(CONCRETE))
def test_each_concrete_error_is_under_its_layer_with_its_exit_code(name):
    layer, code = CONCRETE[name]
    cls = getattr(errors, name)
    assert issubclass(cls, getattr(errors, layer))
    assert [other for other in LAYERS if issubclass(cls, getattr(errors, other))] == [layer]
    assert cls.exit_code == code


def test_the_old_subclasses_keep_their_meaning():
    assert issubclass(errors.PicobootError, errors.FlashError)
    assert issubclass(errors.WrongTargetError, errors.ConnectError)
    assert issubclass(errors.NeedsRootError, errors.SetupError)
    assert issubclass(errors.UnknownUserError, errors.SetupError)
    # A layer widens nothing that code catches by name.
    assert not issubclass(errors.VerifyError, errors.FlashError)
    assert not issubclass(errors.ImageRangeError, errors.FirmwareError)
    assert not issubclass(errors.SerialIssuedError, errors.SerialError)
    assert not issubclass(errors.HistoryChainError, errors.HistoryError)


def test_a_probe_error_is_caught_as_one_and_keeps_its_kind():
    with pytest.raises(errors.ProbeError) as err:
        raise errors.NoProbeError("no probe sim:bay1 is attached")
    assert err.value.to_dict() == {"kind": "NoProbeError", "message": "no probe sim:bay1 is attached",
                                   "hint": None, "exit_code": 7}


def test_result_is_declared_on_the_base_and_the_boot_result_has_its_own_name():
    assert PiflashError.result is None
    assert errors.FlashError("x").result is None
    seen = object()
    err = errors.BootCheckError("boot check rtt:ok failed", seen)
    assert err.boot_result is seen and err.result is None
    err.result = "the job's OperationResult"          # what piflash.jobs.workflow.tracking sets
    assert err.boot_result is seen
    report = object()
    assert errors.HistoryChainError("broken", report).result is report


def test_a_failed_boot_check_keeps_both_results():
    """tracking() sets the job's OperationResult as ``result``; the BootResult stays ``boot_result``."""
    from piflash.jobs.workflow import tracking
    from piflash.record.result import OperationResult

    job = OperationResult.start("flash", None, "sim:x", None)
    seen = object()
    with pytest.raises(errors.BootCheckError) as err:
        with tracking(job):
            raise errors.BootCheckError("boot check failed", seen)
    assert err.value.result is job and err.value.boot_result is seen
    assert job.error["kind"] == "BootCheckError" and job.error["exit_code"] == 26
