"""``piflash sim ...``: the click layer over :mod:`piflash.sim` (needs the ``piflash[sim]`` extra)."""

from __future__ import annotations

import sys

import click

from piflash.cli.completion import complete_sim_board
from piflash.cli.options import CONTEXT, emit_json, handles_errors
from piflash.errors import extra_missing


def _store():
    """The simulator's board store; the ``sim`` extra (unicorn) must be importable.

    :raises ExtraMissingError: (exit 17) unicorn is missing or cannot be imported.
    """
    try:
        import unicorn  # noqa: F401  (the simulator's CPU)
    except ImportError as exc:
        raise extra_missing("sim", str(exc) if exc.name != "unicorn" else "") from None
    from piflash.sim.store import SimStore

    return SimStore()


def _name(board: str) -> str:
    return board[4:] if board.startswith("sim:") else board


def _store_call(func, *args, **kwargs):
    """Call into the simulator, turning its bad-argument and OS errors into clear CLI errors."""
    try:
        return func(*args, **kwargs)
    except (KeyError, ValueError) as exc:
        raise click.UsageError(str(exc.args[0] if exc.args else exc)) from None
    except OSError as exc:
        raise click.UsageError(f"{exc.filename or ''}: {exc.strerror or exc}".lstrip(": ")) from None


def _addresses(ctx, param, values):
    try:
        return [int(v, 0) for v in values]
    except ValueError as exc:
        raise click.BadParameter(f"not an address: {exc}") from None


def _bit_flip(ctx, param, value):
    if value is None:
        return None
    addr, sep, bit = value.partition(":")
    try:
        return {"address": int(addr, 0), "bit": int(bit, 0) if sep else 0}
    except ValueError:
        raise click.BadParameter(f"'{value}' is not ADDR:BIT, e.g. 0x1234:3") from None


@click.group(context_settings=CONTEXT)
def sim():
    """Simulated boards (probe unique IDs sim:NAME), for trying piflash and for tests.

    \b
    A board is created on first use of an ID that starts with a target type
    (sim:nrf51, sim:nrf52840-2, sim:stm32f103rc-a) and keeps its flash between runs.
    """


@sim.command("list")
@click.option("--json", "json_mode", is_flag=True, help="Print JSON.")
@handles_errors
def list_cmd(json_mode):
    """List the simulated boards."""
    boards = _store().list()
    if json_mode:
        # target_uid lower-case hex, as the store keeps it and every other output gives it
        # (docs/result.md); created as every other time: local time with its offset, to the millisecond (piflash.record.result.iso_time)
        emit_json({"boards": [dict(b.to_dict(), created=_local_time(b.created)) for b in boards]})
        return
    if not boards:
        click.echo("No simulated boards. Create one with 'piflash sim create NAME --target TYPE'.")
    for b in boards:
        state = ("present" if b.present else "ejected") + ("" if b.seated else ", fixture empty")
        click.echo(f"sim:{b.name:<24} {b.target:<12} uid {b.target_uid}  {state}  {faults_text(b.faults.to_dict())}")


def faults_text(faults: dict) -> str:
    """A board's faults (:meth:`piflash.sim.faults.Faults.to_dict`) as one line, ``key=value``
    sorted by key, every address as ``0x%08x`` as piflash's errors print them
    (``write_protect=0x00001000 0x00002000``, ``bit_flip=0x00001235:3``); "no faults" for none."""
    shown = []
    for key, value in sorted(faults.items()):
        if key == "write_protect":
            value = " ".join(f"0x{a:08x}" for a in value)
        elif key == "bit_flip":
            value = f"0x{value['address']:08x}:{value['bit']}"
        elif value is True:
            value = "yes"
        shown.append(f"{key}={value}")
    return ", ".join(shown) or "no faults"


def _local_time(created: str) -> str:
    """A board's creation time (ISO 8601 UTC, as the store keeps it) as local time with its
    offset, to the millisecond; a board created before the store kept milliseconds keeps its
    whole seconds (nothing is made up). Unreadable text is returned as it is."""
    import datetime

    try:
        when = datetime.datetime.fromisoformat(created)
    except ValueError:
        return created
    return when.astimezone().isoformat(timespec="milliseconds" if "." in created else "seconds")


@sim.command()
@click.argument("board")
@click.option("--target", "-t", required=True, help="nrf51, nrf52840, stm32f103rc, rp2040 or rp2350.")
@handles_errors
def create(board, target):
    """Create the simulated board BOARD (erased flash)."""
    info = _store_call(_store().create, _name(board), target)
    click.echo(f"created sim:{info.name} ({info.target}, target unique ID {info.target_uid})")


@sim.command()
@click.argument("board", shell_complete=complete_sim_board)
@handles_errors
def delete(board):
    """Delete the simulated board BOARD, its probe and its flash (for good)."""
    _store_call(_store().remove, _name(board))
    click.echo(f"deleted sim:{_name(board)}")


@sim.command()
@click.argument("board", shell_complete=complete_sim_board)
@click.option("--out", "-o", required=True, type=click.Path(dir_okay=False), help="Output .bin file.")
@click.option(
    "--region",
    default="flash",
    show_default=True,
    metavar="NAME",
    help="Which array: flash, uicr (nRF: customer registers, APPROTECT), option (STM32 option bytes).",
)
@handles_errors
def dump(board, out, region):
    """Write BOARD's whole flash (erased bytes 0xFF), or another non-volatile array, to a binary file."""
    store, name = _store(), _name(board)

    def read():
        try:
            return store.read_nvm(name, region)
        except KeyError as exc:
            if store.exists(name):
                raise click.BadParameter(f"sim:{name} has no '{region}' array", param_hint="--region") from None
            raise exc

    data = _store_call(read)

    def write():
        with open(out, "wb") as fh:
            fh.write(data)

    _store_call(write)
    click.echo(f"wrote {len(data):,} bytes of sim:{_name(board)} {region} to {out}")


@sim.command()
@click.argument("board", shell_complete=complete_sim_board)
@click.option(
    "--write-protect",
    multiple=True,
    metavar="ADDR",
    callback=_addresses,
    help="Protect the sector at ADDR (repeatable).",
)
@click.option("--stuck-busy", is_flag=True, help="Flash controller never becomes ready.")
@click.option(
    "--bit-flip", metavar="ADDR:BIT", callback=_bit_flip, help="After programming, bit BIT of byte ADDR reads wrong."
)
@click.option("--disconnect-after", type=int, metavar="N", help="Probe vanishes after N DAP transfers.")
@click.option(
    "--remove-after", type=int, metavar="N", help="Board pulled off the fixture after N DAP transfers (once)."
)
@click.option("--absent", is_flag=True, help="No target on the probe (DP does not answer).")
@click.option("--lock-ignored", is_flag=True, help="A read-out protection lock does not take (chip stays open).")
@click.option("--recover-stuck", is_flag=True, help="The recovery mass erase never finishes.")
@click.option(
    "--option-bytes-fault",
    is_flag=True,
    help="STM32F1: debugger reads of the option-byte block 0x1FFFF800 fault (FLASH_OBR still answers).",
)
@click.option("--clear", is_flag=True, help="Remove every fault first.")
@handles_errors
def fault(
    board,
    write_protect,
    stuck_busy,
    bit_flip,
    disconnect_after,
    remove_after,
    absent,
    lock_ignored,
    recover_stuck,
    option_bytes_fault,
    clear,
):
    """Inject faults into BOARD (they persist until --clear)."""
    store, name = _store(), _name(board)
    if clear:
        _store_call(store.clear_faults, name)
    given = {
        "write_protect": write_protect or None,
        "stuck_busy": stuck_busy or None,
        "bit_flip": bit_flip,
        "disconnect_after": disconnect_after,
        "remove_after": remove_after,
        "absent": absent or None,
        "lock_ignored": lock_ignored or None,
        "recover_stuck": recover_stuck or None,
        "option_bytes_fault": option_bytes_fault or None,
    }
    faults = {key: value for key, value in given.items() if value is not None}
    if faults:
        _store_call(store.set_faults, name, **faults)
    info = _store_call(store.get, name)
    faults = info.faults.to_dict()
    click.echo(f"sim:{name} faults: {faults_text(faults) if faults else 'none'}")


@sim.command()
@click.argument("board", shell_complete=complete_sim_board)
@handles_errors
def plug(board):
    """Plug BOARD's probe back into USB (it is listed again)."""
    _store_call(_store().insert, _name(board))
    click.echo(f"sim:{_name(board)} plugged in")


@sim.command()
@click.argument("board", shell_complete=complete_sim_board)
@handles_errors
def unplug(board):
    """Unplug BOARD's probe from USB (it is no longer listed and cannot be opened)."""
    _store_call(_store().eject, _name(board))
    click.echo(f"sim:{_name(board)} unplugged")


@sim.group("board")
def board_group():
    """The board on a simulated probe's fixture: pull it off, seat it again, swap it for another.

    \b
    The probe sim:NAME stays plugged in throughout, as on a flashing fixture:
      piflash sim board pull NAME       the board is off: the debug port stops answering
      piflash sim board seat NAME       the same board (same unique ID and flash) is back
      piflash sim board swap NAME       a fresh board: new target unique ID, erased flash
    """


@board_group.command("pull")
@click.argument("board", shell_complete=complete_sim_board)
@handles_errors
def board_pull(board):
    """Take the board off BOARD's fixture (the probe stays plugged in)."""
    _store_call(_store().pull, _name(board))
    click.echo(f"sim:{_name(board)}: fixture empty")


@board_group.command("seat")
@click.argument("board", shell_complete=complete_sim_board)
@handles_errors
def board_seat(board):
    """Put the same board back on BOARD's fixture."""
    info = _store_call(_store().seat, _name(board))
    click.echo(f"sim:{info.name}: board {info.target_uid} seated")


@board_group.command("swap")
@click.argument("board", shell_complete=complete_sim_board)
@click.option("--uid", metavar="HEX", help="Target unique ID of the new board [default: random].")
@click.option(
    "--flash",
    "flash_file",
    type=click.Path(exists=True, dir_okay=False),
    help="Raw image of the new board's flash, from the flash base [default: erased].",
)
@click.option(
    "--write-protect",
    multiple=True,
    metavar="ADDR",
    callback=_addresses,
    help="The new board has the sector at ADDR protected (repeatable).",
)
@click.option("--remove-after", type=int, metavar="N", help="The new board will be pulled off after N DAP transfers.")
@handles_errors
def board_swap(board, uid, flash_file, write_protect, remove_after):
    """Replace the board on BOARD's fixture with a fresh one (new unique ID, no faults unless given)."""
    data = None
    if flash_file:
        with open(flash_file, "rb") as fh:
            data = fh.read()
    faults = {"write_protect": write_protect or None, "remove_after": remove_after}
    info = _store_call(
        _store().swap,
        _name(board),
        target_uid=uid,
        flash=data,
        faults={k: v for k, v in faults.items() if v is not None},
    )
    click.echo(f"sim:{info.name}: board {info.target_uid} seated (board #{info.generation})")


@sim.command()
@click.option("--target", "-t", help="Target type of a board created on the fly.")
@click.option("--board", "-b", shell_complete=complete_sim_board, help="Board name [default: the target type].")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", "-p", type=int, default=5555, show_default=True, help="TCP port (0: any free port).")
@handles_errors
def serve(target, board, host, port):
    """Serve a simulated board over pyOCD's remote probe protocol (-u remote:HOST:PORT).

    Runs until Ctrl-C or SIGTERM.
    """
    if not (target or board):
        raise click.UsageError("give --target or --board")
    _store()
    from piflash.sim.probes.server import serve as run_server

    name = _name(board) if board else target

    def ready(server):
        click.echo(
            f"serving sim:{name} on {host}:{server.port} "
            f"(use: -u remote:{host}:{server.port} -t {target or '<target>'})"
        )
        sys.stdout.flush()

    _store_call(run_server, name, host=host, port=port, target=target, on_ready=ready)


def _renamed(group: click.Group, old: str, command: click.Command, new: str) -> None:
    """Keep ``old`` working for scripts written before the rename, hidden from --help."""

    def callback(**kwargs):
        click.secho(f"note: 'piflash {new}' is the new name of this command", fg="yellow", err=True)
        return command.callback(**kwargs)

    group.add_command(click.Command(old, params=command.params, callback=callback, hidden=True, help=command.help))


# Renamed in 0.2 so each name says what it does: delete a board, (un)plug its probe, pull/seat
# the board on the fixture.
_renamed(sim, "remove", delete, "sim delete")
_renamed(sim, "insert", plug, "sim plug")
_renamed(sim, "eject", unplug, "sim unplug")
_renamed(board_group, "remove", board_pull, "sim board pull")
_renamed(board_group, "insert", board_seat, "sim board seat")
