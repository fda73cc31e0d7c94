"""Host CPU per USB transfer and per operation, measured by replaying recorded probe traffic.

1. **Record.** Each target's image is flashed onto a fresh simulated board through a simulated
   USB CMSIS-DAP probe (``piflash.sim.probes.usb``, preset ``--preset``), once by piflash
   (``flash_firmware``: erase auto, program, verify, reset) and once the way ``pyocd flash``
   does (pyOCD's ``FileProgrammer``, reset), as ``benchmarks/real_probe.py`` runs them, the
   device charging the ``x86`` host preset's time per transfer (the number of polls that find
   the flash busy depends on it); every DAP packet and its response are kept
   (``SimUsbDevice.recording``). A third recording opens a
   session and loads the flash algorithm (``Flash.init``) once.
2. **Replay.** Child processes (no simulator in them: no board, no emulator, no virtual clock)
   run the same code against ``piflash.sim.probes.usb.replay``, which answers each packet with
   the recorded response and fails loudly on any packet that differs. What is timed is the CPU
   of pyOCD + piflash + pyusb (``time.process_time``: every thread of the process), per phase.
   Each child replays twice: ``cold`` (the first flash in a process: pyOCD's lazy imports and
   caches) and ``warm`` (the next, as a station's next board). ``pyocd flash --help`` children
   give pyOCD's start-up CPU (``RUSAGE_CHILDREN``). Cases are interleaved, ``--repeats`` rounds,
   and each figure is the median.

The file's load is timed on its own in the piflash children, twice: parsed (the parsed-image
cache off) and read back from the cache (``piflash/firmware/cache.py``), as a command that
loaded the same file before does (``parse_s``, ``cached_s``).

Per packet = CPU divided by the DAP packets sent and received (each command sent and each
response read; one response per command), which is what the timing model charges per packet
(``piflash/sim/probes/usb/timing.py``, ``HostPreset.transfer_s``): for the whole flash (from the
session's opening to its close, image parse excluded: ``per_transfer_us``) and per phase
(``spans``: ``per_packet_us``), and for the phases that carry the bytes together (``bulk``:
erase, program, verify). piflash encodes the DAP transfers itself
(``piflash/probe/lean_dap.py``); the case ``piflash-pyocd-dap`` (``PIFLASH_DAP_LEAN=0``: pyOCD's
own encoding) runs interleaved with ``piflash``, and ``lean`` gives, per target, the median of the
per-round ratios of their bulk CPU per packet.

    python benchmarks/host_cost.py [--json] [--repeats 5] [--targets nrf51,nrf52840,stm32f103rc]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from piflash.probe.lean_dap import LEAN_ENV

HERE = Path(__file__).resolve().parent
TOOLS = ("piflash", "pyocd")
#: piflash with pyOCD's own DAP encoding (``PIFLASH_DAP_LEAN=0``, piflash/probe/lean_dap.py off),
#: interleaved with ``piflash`` to measure what the lean path saves per packet.
PYOCD_DAP = "piflash-pyocd-dap"
#: The phases that carry the image's bytes (piflash's progress phases).
BULK_PHASES = ("erase", "program", "verify")


# -- recording (parent process, simulator in-process) ----------------------------------------
def record_all(targets, preset: str, work: Path) -> dict:
    """Record every (target, tool) flash and the algorithm load; returns
    ``{(target, case): (recording file, image file)}`` (case: ``piflash``, ``pyocd``, ``algo``)."""
    os.environ["PIFLASH_SIM_DIR"] = str(work / "boards")
    sys.path.insert(0, str(HERE))
    import logging
    logging.disable(logging.WARNING)
    from real_probe import make_image, run_piflash, run_pyocd

    from piflash.sim import SimStore
    from piflash.sim.probes import usb as sim_usb
    from piflash.sim.probes.usb.replay import Recording
    from piflash.sim.probes.usb.timing import HOST_PRESETS
    x86 = HOST_PRESETS["x86"]
    out = {}
    for target in targets:
        image = make_image(target, work)
        for case in TOOLS + (PYOCD_DAP, "algo"):
            board = "%s-%s" % (case, target)
            store = SimStore()
            store.create(board, target, exist_ok=True)
            sim_usb.uninstall()
            os.environ[sim_usb.ENV_VAR] = "%s@%s" % (board, preset)
            device = sim_usb.install(store=store).devices[0]
            # How many polls find the flash still busy depends on the host's time per transfer:
            # record at the x86 preset's, so the measurement of x86 is self-consistent.
            device.host_transfer_s = x86.transfer_s["pyocd" if case in ("pyocd", "algo") else "piflash"]
            device.recording = []
            if case in ("piflash", PYOCD_DAP):
                os.environ[LEAN_ENV] = "0" if case == PYOCD_DAP else "1"
                run_piflash(device, target, image)
                del os.environ[LEAN_ENV]
            elif case == "pyocd":
                run_pyocd(device, target, image)
            else:
                _algo_load(device.serial, target)
            path = work / ("%s-%s.json" % (case, target))
            path.write_text(Recording(preset, device.serial, device.recording).to_json())
            out[(target, case)] = (path, image)
    sim_usb.uninstall()
    del os.environ[sim_usb.ENV_VAR]
    return out


def _algo_load(serial: str, target: str, timer=None) -> None:
    """Open a session, load the boot flash's algorithm for programming, clean up, close.
    ``timer(label)`` (if given) is called before each step."""
    from pyocd.core.helpers import ConnectHelper
    mark = timer or (lambda label: None)
    mark("connect")
    session = ConnectHelper.session_with_chosen_probe(unique_id=serial, blocking=False,
                                                      target_override=target)
    with session:
        flash = session.board.target.memory_map.get_boot_memory().flash
        mark("algo_load")
        flash.init(flash.Operation.PROGRAM)
        mark("cleanup")
        flash.cleanup()
        mark("close")
    mark("end")


# -- replay (child process, no simulator) ------------------------------------------------------
class _Timer:
    """Process CPU time and packets sent at each labelled point."""

    def __init__(self, device) -> None:
        self.device = device
        self.points = []

    def __call__(self, label: str) -> None:
        self.points.append((label, time.process_time(), self.device.sent))

    def spans(self) -> dict:
        """``{label: {"cpu_s", "transfers"}}`` from each point to the next."""
        out = {}
        for (label, t0, n0), (_next, t1, n1) in zip(self.points, self.points[1:]):
            span = out.setdefault(label, {"cpu_s": 0.0, "transfers": 0})
            span["cpu_s"] += t1 - t0
            span["transfers"] += 2 * (n1 - n0)          # one IN transfer per OUT packet
        return out


class _Sink:
    """A piflash ProgressSink that marks each phase's start."""

    def __init__(self, timer) -> None:
        self.timer = timer

    def phase_start(self, phase, total) -> None:
        self.timer(getattr(phase, "value", phase))

    def phase_update(self, phase, done) -> None:
        pass

    def phase_end(self, phase, summary="") -> None:
        pass

    def message(self, text) -> None:
        pass


#: Seconds ``time.sleep`` was asked for since the current replay began (see :func:`_count_sleeps`).
_SLEEPS = [0.0]


def replay_once(case: str, recording_path: Path, image: Path, target: str) -> dict:
    """Replay one recording in this process; returns ``{"spans", "parse_cpu_s", "sleep_s",
    "transfers", "cpu_s"}``. :raises ReplayMismatch: The traffic differs from the recording."""
    from piflash.sim.probes import usb as sim_usb
    from piflash.sim.probes.usb.replay import Recording, replay_backend
    from piflash.sim.specs import TARGETS
    recording = Recording.from_json(recording_path.read_text())
    sim_usb.uninstall()
    device = sim_usb.install_backend(replay_backend(recording)).devices[0]
    timer = _Timer(device)
    base = TARGETS[target].flash.start if image.suffix == ".bin" else None
    _SLEEPS[0] = 0.0
    parse = None
    if case in ("piflash", PYOCD_DAP):
        from piflash.firmware.image import load_image
        from piflash.jobs.workflow import flash_firmware
        t0 = time.process_time()
        img = load_image(str(image), base_address=base)
        parse = time.process_time() - t0
        timer("connect")
        flash_firmware(img, probe=device.serial, target=target, progress=_Sink(timer))
        timer("end")
    elif case == "pyocd":
        from pyocd.core.helpers import ConnectHelper
        from pyocd.flash.file_programmer import FileProgrammer
        timer("connect")
        session = ConnectHelper.session_with_chosen_probe(unique_id=device.serial, blocking=False,
                                                          target_override=target)
        with session:
            programmer = FileProgrammer(session, progress=lambda _fraction: None)
            timer("parse")          # FileProgrammer.program() is add_file() then commit()
            programmer.add_file(str(image), base_address=base)
            timer("program")
            programmer.commit()
            timer("reset")
            session.board.target.reset()
            timer("disconnect")
        timer("end")
    else:
        _algo_load(device.serial, target, timer)
    device.check_done()
    spans = timer.spans()
    parse_span = spans.pop("parse", {"cpu_s": 0.0})     # the file parse is reported on its own
    if parse is None:
        parse = parse_span["cpu_s"]
    sim_usb.uninstall()
    return {"spans": spans, "parse_cpu_s": parse, "sleep_s": _SLEEPS[0],
            "transfers": sum(s["transfers"] for s in spans.values()),
            "cpu_s": sum(s["cpu_s"] for s in spans.values())}


def _count_sleeps() -> None:
    """Sum what ``time.sleep`` is asked for (pyOCD's waits), still sleeping as asked."""
    real_sleep = time.sleep

    def sleep(seconds):
        _SLEEPS[0] += seconds
        real_sleep(seconds)
    time.sleep = sleep


def child_main(argv) -> int:
    """``--replay CASE RECORDING IMAGE TARGET``: replay twice, print ``{"cold", "warm"}``."""
    case, recording, image, target = argv
    _count_sleeps()
    import logging
    logging.disable(logging.WARNING)
    cache = tempfile.mkdtemp(prefix="host_cost-cache-")
    os.environ["PIFLASH_CACHE"] = cache         # empty: the first load parses, the next reads back
    runs = [replay_once(case, Path(recording), Path(image), target) for _ in range(2)]
    loads = _loads(Path(image), target, cache) if case in ("piflash", PYOCD_DAP) else {}
    print(json.dumps({"cold": runs[0], "warm": runs[1], "loads": loads}))
    return 0


def _loads(image: Path, target: str, cache: str) -> dict:
    """piflash's ``load_image`` of ``image`` on its own, the interpreter warm: ``parse_s`` with
    the parsed-image cache off (the file parsed), ``cached_s`` with it on and holding the file
    (piflash/firmware/cache.py: what a command that loaded the file before pays). CPU seconds,
    the median of 5 each."""
    from piflash.firmware.image import load_image
    from piflash.sim.specs import TARGETS

    base = TARGETS[target].flash.start if image.suffix == ".bin" else None
    out = {}
    for label, setting in (("parse_s", "off"), ("cached_s", cache)):
        os.environ["PIFLASH_CACHE"] = setting
        load_image(str(image), base_address=base)
        times = []
        for _ in range(5):
            t0 = time.process_time()
            load_image(str(image), base_address=base)
            times.append(time.process_time() - t0)
        out[label] = statistics.median(times)
    return out


def run_child(case, recording, image, target, env) -> dict:
    out = subprocess.run([sys.executable, __file__, "--replay", case, str(recording), str(image),
                          target], env=env, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise SystemExit("replay of %s on %s failed:\n%s" % (case, target, out.stderr[-3000:]))
    return json.loads(out.stdout.splitlines()[-1])


def startup_cpu(env) -> float:
    """CPU seconds (user + system) of one ``pyocd flash --help`` process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-m", "pyocd", "flash", "--help"], env=env,
                   capture_output=True, check=True, timeout=120)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


# -- the run ---------------------------------------------------------------------------------
def machine() -> str:
    """This machine, named: CPU model, cores, load average, kernel, Python, pyOCD."""
    model = platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model += " " + line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import importlib.metadata as md
    return "%s, %d cores, load average %.1f, Linux %s, Python %s, pyOCD %s" % (
        model, os.cpu_count() or 0, os.getloadavg()[0], platform.release(),
        platform.python_version(), md.version("pyocd"))


def _median(values):
    return statistics.median(values) if values else 0.0


def bench(targets, preset: str, repeats: int) -> dict:
    work = Path(tempfile.mkdtemp(prefix="host_cost-"))
    recordings = record_all(targets, preset, work)
    env = dict(os.environ, PIFLASH_SIM_DIR=str(work / "empty"))
    env.pop("PIFLASH_SIM_USB", None)
    env.pop("PIFLASH_SIM_USB_LEDGER", None)
    results = {key: [] for key in recordings}
    startups = []
    for _round in range(repeats):               # interleaved: every case once per round
        for key, (recording, image) in recordings.items():
            child_env = dict(env, **{LEAN_ENV: "0" if key[1] == PYOCD_DAP else "1"})
            results[key].append(run_child(key[1], recording, image, key[0], child_env))
        startups.append(startup_cpu(env))
    rows = []
    for (target, case), runs in results.items():
        row = {"target": target, "case": case, "preset": preset, "repeats": len(runs),
               "transfers": runs[0]["warm"]["transfers"]}
        for state in ("cold", "warm"):
            cpu = [r[state]["cpu_s"] for r in runs]
            row[state] = {
                "cpu_s": round(_median(cpu), 4),
                "cpu_s_range": [round(min(cpu), 4), round(max(cpu), 4)],
                "per_transfer_us": round(_median([r[state]["cpu_s"] / r[state]["transfers"] * 1e6
                                                  for r in runs]), 1),
                "spans": {label: {"cpu_s": round(_median([r[state]["spans"][label]["cpu_s"]
                                                          for r in runs]), 4),
                                  "transfers": r0["transfers"],
                                  "per_packet_us": round(_median([r[state]["spans"][label]["cpu_s"]
                                                                  / max(1, r0["transfers"]) * 1e6
                                                                  for r in runs]), 2)}
                          for label, r0 in runs[0][state]["spans"].items()},
            }
            bulk = [_bulk(r[state]) for r in runs]
            if bulk[0]["transfers"]:
                row[state]["bulk"] = {"cpu_s": round(_median([b["cpu_s"] for b in bulk]), 4),
                                      "transfers": bulk[0]["transfers"],
                                      "per_packet_us": round(_median([b["cpu_s"] / b["transfers"] * 1e6
                                                                      for b in bulk]), 2)}
        if case in ("piflash", PYOCD_DAP):      # the file parsed, and read back from the cache
            row["parse_cpu_s"] = round(_median([r["loads"]["parse_s"] for r in runs]), 5)
            row["cached_load_cpu_s"] = round(_median([r["loads"]["cached_s"] for r in runs]), 5)
        else:
            row["parse_cpu_s"] = round(_median([r["warm"]["parse_cpu_s"] for r in runs]), 4)
        row["image_bytes"] = recordings[(target, case)][1].stat().st_size
        row["image_format"] = "hex" if recordings[(target, case)][1].suffix == ".hex" else "bin"
        row["sleep_s"] = round(_median([r["warm"]["sleep_s"] for r in runs]), 4)
        rows.append(row)
    return {"machine": machine(), "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "lean": lean_ratios(results),
            "pyocd_startup_cpu_s": round(_median(startups), 3),
            "pyocd_startup_cpu_s_range": [round(min(startups), 3), round(max(startups), 3)],
            "rows": rows}


def _bulk(run: dict) -> dict:
    """CPU seconds and packets of one replay's bulk phases (:data:`BULK_PHASES`) together."""
    spans = [run["spans"][p] for p in BULK_PHASES if p in run["spans"]]
    return {"cpu_s": sum(s["cpu_s"] for s in spans), "transfers": sum(s["transfers"] for s in spans)}


def lean_ratios(results: dict) -> dict:
    """Per target: piflash's bulk-phase CPU per packet with its own DAP encoding over pyOCD's
    (first flash in a process), the median of the per-round ratios (the two cases ran
    interleaved, A B A B), with its range."""
    out = {}
    for (target, case), runs in results.items():
        plain = results.get((target, PYOCD_DAP))
        if case != "piflash" or not plain:
            continue
        ratios = []
        for a, b in zip(runs, plain):
            ba, bb = _bulk(a["cold"]), _bulk(b["cold"])
            ratios.append((ba["cpu_s"] / ba["transfers"]) / (bb["cpu_s"] / bb["transfers"]))
        out[target] = {"bulk_per_packet_ratio": round(_median(ratios), 3),
                       "range": [round(min(ratios), 3), round(max(ratios), 3)]}
    return out


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--replay"]:
        return child_main(argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--preset", default="debugprobe")
    parser.add_argument("--targets", default="nrf51,nrf52840,stm32f103rc")
    args = parser.parse_args(argv)
    result = bench(args.targets.split(","), args.preset, args.repeats)
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    print(result["machine"])
    print("pyocd flash --help: %.3f s CPU (median of %d)" % (result["pyocd_startup_cpu_s"],
                                                              args.repeats))
    print("%-11s %-17s %9s %9s %9s %9s %8s %8s %7s" % ("target", "case", "transfers", "cold_s",
                                                        "warm_s", "us/xfer", "parse_s", "cached_s",
                                                        "sleep_s"))
    for r in result["rows"]:
        cached = "%8.4f" % r["cached_load_cpu_s"] if "cached_load_cpu_s" in r else "%8s" % "-"
        print("%-11s %-17s %9d %9.3f %9.3f %9.1f %8.4f %s %7.3f" % (
            r["target"], r["case"], r["transfers"], r["cold"]["cpu_s"], r["warm"]["cpu_s"],
            r["warm"]["per_transfer_us"], r["parse_cpu_s"], cached, r["sleep_s"]))
        print("    warm spans: " + ", ".join("%s %.3f s/%d (%.1f us)" % (k, v["cpu_s"], v["transfers"],
                                                                       v["per_packet_us"])
                                              for k, v in r["warm"]["spans"].items()))
        for state in ("cold", "warm"):
            if "bulk" in r[state]:
                b = r[state]["bulk"]
                print("    %s bulk (erase, program, verify): %.3f s CPU / %d packets = %.2f us per packet"
                      % (state, b["cpu_s"], b["transfers"], b["per_packet_us"]))
    for target, b in result["lean"].items():
        print("%s: piflash bulk CPU per packet, lean / pyOCD's encoding %.3f (range %.3f-%.3f)"
              % (target, b["bulk_per_packet_ratio"], *b["range"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
