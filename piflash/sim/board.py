"""Assembly of a complete simulated board: bus, CPU, debug components, flash, peripherals, DAP.

Memory map (CPU and debugger): main flash (and the STM32 boot alias) as emulator memory backed
by the flash array; RAM; peripheral space 0x40000000-0x5FFFFFFF (modelled peripherals, the rest
reads 0); the PPB 0xE0000000-0xE00FFFFF with the SCS, DWT, FPB and ROM table (the rest reads 0);
family extras (nRF FICR/UICR, STM32 system memory). Anything else is unmapped: a debugger access
gets a SWD FAULT, a CPU access locks the core up.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence

from piflash.sim.chips import attach as attach_chip
from piflash.sim.cpu import Cpu, CpuMemoryRegion
from piflash.sim.debug.coresight import Dwt, Fpb, RomTable
from piflash.sim.debug.dap import AccessPortModel, MemAp, SwDp
from piflash.sim.debug.scs import CORES, SCS_BASE, V8M_DEVARCH, Scs
from piflash.sim.faults import Faults
from piflash.sim.memory.bus import Bus, DeviceRegion, ZeroRegion
from piflash.sim.memory.nvm import NvmArray, NvmController, NvmRegion
from piflash.sim.specs import TargetSpec

__all__ = ["SimBoard", "ROM_TABLE_BASE", "DWT_BASE", "FPB_BASE"]

#: Standard Cortex-M debug component addresses (ARMv7-M ARM table B3-1 / C1-1).
ROM_TABLE_BASE = 0xE00FF000
DWT_BASE = 0xE0001000
FPB_BASE = 0xE0002000
PERIPHERAL_BASE, PERIPHERAL_SIZE = 0x40000000, 0x20000000
PPB_BASE, PPB_SIZE = 0xE0000000, 0x00100000


class SimBoard:
    """One simulated board, alive while a probe has it open.

    :param spec: Target type description.
    :param target_uid: Factory unique ID bytes (``spec.uid_length`` bytes).
    :param images: {nvm name: contents} for every array of ``spec.nvm``.
    :param faults: Fault settings; the object is shared with the models and may be updated in
        place with :meth:`apply_faults`.

    Attributes: ``dp`` (:class:`~piflash.sim.debug.dap.SwDp`, what the probe talks to), ``bus``,
    ``cpu``, ``scs``, ``nvm`` ({name: NvmArray}), ``stats`` (this session's flash operation
    counts: erase_ops, program_ops, program_bytes).
    """

    def __init__(self, spec: TargetSpec, target_uid: bytes, images: Dict[str, bytes], faults: Faults) -> None:
        self.spec = spec
        self.target_uid = bytes(target_uid)
        self.faults = faults
        self.stats: Dict[str, int] = {"erase_ops": 0, "program_ops": 0, "program_bytes": 0}
        self.core = CORES[spec.core]
        self.bus = Bus()
        self.nvm: Dict[str, NvmArray] = {n.name: NvmArray(n, images[n.name], faults, self.stats) for n in spec.nvm}
        self.cpu = Cpu(spec.core, self.core.has_fpu, self.bus)
        self._reset_hooks: List[Callable[[], None]] = []
        self._aps: Dict[int, AccessPortModel] = {}
        self._ram_dirty = True

        self.cpu.map_ram(spec.ram_start, spec.ram_size)
        self.bus.add(CpuMemoryRegion(self.cpu, spec.ram_start, spec.ram_size, self._mark_ram_dirty))
        self.bus.add_background(ZeroRegion(PERIPHERAL_BASE, PERIPHERAL_SIZE, "peripherals"))
        self.cpu.map_mmio(PERIPHERAL_BASE, PERIPHERAL_SIZE)

        core = self.core
        self.scs = Scs(
            core,
            self.cpu,
            read_word=lambda addr: self.bus.read(addr, 4),
            system_reset=self.system_reset,
            before_run=self._before_run,
        )
        self.bus.add(DeviceRegion(SCS_BASE, 0x1000, self.scs, "scs"))
        v8m = V8M_DEVARCH if core.arch == "v8m" else {}
        self.bus.add(DeviceRegion(DWT_BASE, 0x1000, Dwt(core.dwt_part, core.dwt_comparators, v8m.get("dwt")), "dwt"))
        self.bus.add(
            DeviceRegion(FPB_BASE, 0x1000, Fpb(core.fpb_part, core.fpb_code, core.fpb_lit, v8m.get("fpb")), "fpb")
        )
        self.bus.add(
            DeviceRegion(
                ROM_TABLE_BASE,
                0x1000,
                RomTable(core.rom_part, ROM_TABLE_BASE, [SCS_BASE, DWT_BASE, FPB_BASE]),
                "rom-table",
            )
        )
        self.bus.add_background(ZeroRegion(PPB_BASE, PPB_SIZE, "ppb"))
        self.cpu.map_mmio(PPB_BASE, PPB_SIZE)

        #: Set by the family builder when the part has read-out protection: ``(addr, length) ->
        #: bool``, True when the debugger is refused those bytes (see MemAp's ``guard``).
        self.debug_guard: Optional[Callable[[int, int], bool]] = None
        #: The family's own model object, if it has one (the RP2040 boot ROM), for tests.
        self.chip: Optional[object] = None
        #: The core's clock now, Hz, where the family models its clock tree (RP2040); None: the
        #: timing model's fixed clock for the target type.
        self.clock_hz: Optional[Callable[[], float]] = None
        self._debug_port: Optional[Callable[[Dict[int, AccessPortModel]], SwDp]] = None
        attach_chip(self)  # the family's peripherals, flash controller, extra APs

        self._aps[0] = MemAp(spec.ap_idr, self.bus, ROM_TABLE_BASE, spec.ap_wrap, guard=self.debug_guard)
        self.dp = (self._debug_port or (lambda aps: SwDp(spec.dpidr, aps)))(self._aps)
        self.system_reset()  # power-on reset

    # -- construction helpers used by the family builders ------------------------------------
    def set_flash_controller(
        self,
        nvm: NvmArray,
        controller: NvmController,
        bus_region: Optional[NvmRegion] = None,
        cpu_aliases: Sequence[int] = (),
    ) -> None:
        """Attach ``controller`` to ``nvm``: adds the bus region(s), and for the main flash maps
        the array (and the boot alias, if the target has one) into the CPU, whose stores there go
        to ``controller.store``. Other arrays must be reached by the CPU through an MMIO range
        the family maps. ``bus_region``: the debugger's view of the array, when the family's
        differs from a plain :class:`NvmRegion` (the RP2040's XIP, whose reads cost time).
        ``cpu_aliases``: further addresses where the core sees the main flash's cells
        (:meth:`piflash.sim.cpu.Cpu.map_flash`); the debugger's copies there are the family's
        to add."""
        self.bus.add(bus_region or NvmRegion(nvm, controller))
        if nvm.name != "flash":
            return
        nvm.add_mirror(self.cpu.map_flash(nvm.start, nvm.size, controller.store, cpu_aliases))
        alias = self.spec.flash_alias
        if alias is not None:
            delta = nvm.start - alias
            self.bus.add(NvmRegion(nvm, controller, alias_start=alias))
            # The alias copy is refreshed when the core resumes (see NvmArray.add_mirror).
            nvm.add_mirror(
                self.cpu.map_flash(
                    alias, nvm.size, lambda addr, size, value: controller.store(addr + delta, size, value)
                ),
                lazy=True,
            )

    def set_debug_port(self, build: Callable[[Dict[int, AccessPortModel]], SwDp]) -> None:
        """Have ``build(aps)`` make the debug port instead of a single SW-DP (a multi-drop
        wire, :class:`~piflash.sim.debug.multidrop.MultidropWire`); ``aps`` holds the AHB-AP at
        APSEL 0 and the family's extra APs."""
        self._debug_port = build

    def add_reset_hook(self, hook: Callable[[], None]) -> None:
        """Call ``hook`` on every system reset (before the core restarts)."""
        self._reset_hooks.append(hook)

    def add_ap(self, apsel: int, ap: AccessPortModel) -> None:
        """Attach an extra access port at ``apsel``."""
        self._aps[apsel] = ap

    # -- resets ------------------------------------------------------------------------------
    def system_reset(self) -> None:
        """System reset (SYSRESETREQ, pin reset release, power-on): peripherals, then the core
        restarts from the vector table (debug domain, DP and RAM contents are kept)."""
        for hook in self._reset_hooks:
            hook()
        if not self.scs.reset_held:
            self.scs.core_reset()

    def set_reset_pin(self, asserted: bool) -> None:
        """Drive nRESET: asserting holds the system in reset, releasing performs the reset."""
        if asserted:
            self.scs.hold_reset(True)
        elif self.scs.reset_held:
            self.scs.hold_reset(False)
            self.system_reset()

    # -- state -------------------------------------------------------------------------------
    def apply_faults(self, faults: Faults) -> None:
        """Replace the fault settings in place (all models see the change at once)."""
        self.faults.update_from(faults)

    @property
    def nvm_version(self) -> int:
        """Changes whenever any NVM array changes."""
        return sum(nvm.version for nvm in self.nvm.values())

    def nvm_images(self) -> Dict[str, bytes]:
        """Copies of all NVM arrays, for saving."""
        return {name: nvm.snapshot() for name, nvm in self.nvm.items()}

    # -- internals ---------------------------------------------------------------------------
    def _mark_ram_dirty(self) -> None:
        self._ram_dirty = True

    def _before_run(self) -> None:
        dirty = self._ram_dirty
        for nvm in self.nvm.values():
            nvm.sync_mirrors()
            dirty = dirty or nvm.dirty
            nvm.dirty = False
        if dirty:
            self.cpu.flush_translation_cache()
        self._ram_dirty = False
