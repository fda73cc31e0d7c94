"""Let a user (and the station service) open USB debug probes without root.

What :func:`setup_permissions` does, on ``/`` or on another root file system
(``root``, for image builders such as pi-gen and for tests):

1. creates the ``plugdev`` group, and the ``spi`` and ``gpio`` groups of the Raspberry Pi's
   SPI and GPIO nodes (:data:`piflash.probe.probetable.PIN_GROUPS`, Raspberry Pi OS's own; plain
   Debian has none), when they are missing (``groupadd --system --root``);
2. adds the user to each (``gpasswd --add --root``);
3. installs piflash's udev rules (``etc/udev/rules.d/60-piflash-probes.rules``,
   the packaged copy generated from :mod:`piflash.probe.probetable`: USB probes for
   ``plugdev``, ``/dev/spidev*`` for ``spi``, ``/dev/gpiochip*`` and ``/dev/gpiomem`` for ``gpio``);
4. reloads and triggers udev, only when ``root`` is ``/`` and udev is running.

What it changed is recorded in ``<root>/var/lib/piflash/permissions.json`` so that
:func:`uninstall_permissions` reverts exactly that and nothing else. A second run
changes nothing. Every change is printed; with ``dry_run`` it is only printed.

Standard library only, so ``scripts/setup-probe-permissions.sh`` runs it with the
system ``python3`` (``python3 -m piflash.probe.permissions``) before piflash is installed;
``piflash setup permissions`` calls the same functions.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from piflash import settings
from piflash.errors import NeedsRootError, PiflashError, SetupError, UnknownUserError
from piflash.probe.probetable import GROUP, PIN_GROUPS, RULES_NAME, packaged_rules_path

#: Every group the setup creates when missing and adds the user to, in order.
GROUPS = (GROUP,) + PIN_GROUPS

#: Where the rules go, relative to the root (udev(7): local administration rules).
RULES_DIR = "etc/udev/rules.d"
#: Where the record of what was changed goes, relative to the root.
STATE_FILE = "var/lib/piflash/permissions.json"

Echo = Callable[[str], None]


def setup_command(user: Optional[str] = None) -> str:
    """The command a user runs to fix probe permissions (str), as exact as this process knows it.

    ``sudo piflash`` fails when piflash lives in a venv that is not on root's PATH, so the
    absolute path of the ``piflash`` found on PATH (or ``python -m piflash``) is used.
    """
    exe = shutil.which("piflash")
    base = shlex.quote(exe) if exe else f"{shlex.quote(sys.executable)} -m piflash"
    return f"sudo {base} setup permissions" + (f" --user {shlex.quote(user)}" if user else "")


def fix_text(user: Optional[str]) -> str:
    """The fix for a user who cannot open probes: :func:`setup_command`, then a new login (str)."""
    if not user or user == "root":
        return setup_command()
    return f"{setup_command(user)}, then log out and back in"


def read_groups(root: str) -> Dict[str, Tuple[int, List[str]]]:
    """Every group in ``<root>/etc/group``: ``{name: (gid, members)}`` (empty when unreadable)."""
    path = Path(root, "etc/group")
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return {}
    out = {}
    for line in lines:
        fields = line.split(":")
        if len(fields) >= 4 and fields[2].isdigit():
            out[fields[0]] = (int(fields[2]), [m for m in fields[3].split(",") if m])
    return out


def read_group(root: str, name: str = GROUP) -> Optional[Tuple[int, List[str]]]:
    """``(gid, members)`` of group ``name`` in ``<root>/etc/group``, or None when it is absent."""
    return read_groups(root).get(name)


def read_user(root: str, name: str) -> Optional[Tuple[int, int]]:
    """``(uid, primary gid)`` of user ``name`` in ``<root>/etc/passwd``, or None."""
    path = Path(root, "etc/passwd")
    for line in path.read_text().splitlines() if path.exists() else []:
        fields = line.split(":")
        if len(fields) >= 4 and fields[0] == name:
            return int(fields[2]), int(fields[3])
    return None


def is_member(root: str, user: str, group: str = GROUP) -> bool:
    """Whether ``user`` belongs to ``group`` in the root's files (as a member or by primary gid)."""
    entry = read_group(root, group)
    if entry is None:
        return False
    who = read_user(root, user)
    return user in entry[1] or (who is not None and who[1] == entry[0])


def _is_slash(root: str) -> bool:
    return os.path.realpath(root) == "/"


def _inside(root: str, rel: str) -> Path:
    """``root/rel``, refusing a path that a symlink inside the root leads out of it."""
    path = Path(root, rel)
    real_root = os.path.realpath(root)
    real = os.path.realpath(path)
    if real_root != "/" and not (real + "/").startswith(real_root.rstrip("/") + "/"):
        raise SetupError(f"{path} leads outside {root} (to {real}); refusing to write there")
    return path


def _say(echo: Echo, dry_run: bool, would: str, did: str, cmd: Optional[List[str]] = None) -> None:
    """Print one change: ``would ...`` in a dry run, else what was done; with the command run."""
    shown = f"  [{' '.join(shlex.quote(c) for c in cmd)}]" if cmd else ""
    echo((f"would {would}" if dry_run else did) + shown)


def _run(cmd: List[str], dry_run: bool, echo: Echo, would: str, did: str) -> None:
    """Run ``cmd`` (an argument list, no shell) unless ``dry_run``, then say what it did.

    :raises SetupError: the command failed (its stderr is in the message).
    """
    if not dry_run:
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise SetupError(f"{cmd[0]} failed (exit {proc.returncode}): {proc.stderr.strip() or proc.stdout.strip()}")
    _say(echo, dry_run, would, did, cmd)


def _root_opt(root: str) -> List[str]:
    return [] if _is_slash(root) else ["--root", os.path.realpath(root)]


def _load_state(root: str) -> Dict[str, Any]:
    path = _inside(root, STATE_FILE)
    if not path.exists():
        return {}
    try:
        state: Dict[str, Any] = json.loads(path.read_text())
    except ValueError as exc:
        raise SetupError(
            f"{path} is not valid JSON ({exc})", hint="it records what the setup changed; fix or remove it by hand"
        ) from None
    # Records of version 1 knew plugdev only: "group_created" (bool) and "users_added" (its members).
    if state.pop("group_created", False):
        state.setdefault("groups_created", [GROUP])
    if "users_added" in state:
        state.setdefault("members_added", {})[GROUP] = state.pop("users_added")
    return state


def _save_state(root: str, state: Dict[str, Any]) -> None:
    path = _inside(root, STATE_FILE)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


def _missing_dirs(root: str, rel: str) -> List[str]:
    """Relative directories of ``rel`` (itself included) that do not exist yet, outermost first."""
    parts = Path(rel).parts
    return [str(Path(*parts[:i])) for i in range(1, len(parts) + 1) if not Path(root, *parts[:i]).is_dir()]


def _require_root(dry_run: bool) -> None:
    if not dry_run and os.geteuid() != 0:
        raise NeedsRootError(
            "setting up probe permissions changes system files (a group, udev rules) and needs root",
            hint=f"run it with sudo: {setup_command()}  (--dry-run shows what it would change, without root)",
        )


def reload_udev(root: str, dry_run: bool, echo: Echo) -> bool:
    """Reload udev's rules and re-trigger USB, hidraw and tty devices so attached probes get them,
    and the spidev, gpio and gpiomem nodes so the Pi's pins get their groups.

    Only when ``root`` is ``/`` and udev runs (``/run/udev/control`` exists); otherwise says
    why it skipped. :returns: whether udev was reloaded (bool).
    """
    udevadm = shutil.which("udevadm")
    if not _is_slash(root):
        echo(f"udev reload skipped: {root} is not the running system (its udev reads the rules at boot)")
        return False
    if udevadm is None or not os.path.exists("/run/udev/control"):
        echo("udev reload skipped: udev is not running here (a container?); the rules apply when udev next starts")
        return False
    _run([udevadm, "control", "--reload"], dry_run, echo, "reload udev rules", "reloaded udev rules")
    _run(
        [
            udevadm,
            "trigger",
            "--action=change",
            "--subsystem-match=usb",
            "--subsystem-match=hidraw",
            "--subsystem-match=tty",
            "--subsystem-match=spidev",
            "--subsystem-match=gpio",
            "--subsystem-match=bcm2835-gpiomem",
        ],
        dry_run,
        echo,
        "re-apply the rules to attached USB devices and the SPI/GPIO nodes",
        "re-applied the rules to attached USB devices and the SPI/GPIO nodes",
    )
    return True


def setup_permissions(
    root: str = "/", user: Optional[str] = None, dry_run: bool = False, echo: Echo = print
) -> List[str]:
    """Create ``plugdev``, ``spi`` and ``gpio`` (:data:`GROUPS`) if missing, add ``user`` to
    them, install the rules, reload udev.

    :param root: root file system to change (str path); ``/`` for this machine.
    :param user: user to add (str), or None for ``$SUDO_USER`` (no user when that is unset).
    :param dry_run: print every change without making it.
    :param echo: called with each line of output (str).
    :returns: the changes made (or, with ``dry_run``, that would be made), one str each.
    :raises NeedsRootError: not root (and not ``dry_run``).
    :raises UnknownUserError: ``user`` is not in ``<root>/etc/passwd``.
    :raises SetupError: a tool (groupadd, gpasswd, udevadm) failed, or a path escapes ``root``.
    """
    _require_root(dry_run)
    if not Path(root).is_dir():
        raise SetupError(f"root {root} is not a directory")
    if user is None:
        user = settings.SUDO_USER.value()
    if user is not None and read_user(root, user) is None:
        raise UnknownUserError(
            f"no user '{user}' in {Path(root, 'etc/passwd')}", hint="give an existing account with --user NAME"
        )
    state = _load_state(root)
    changes: List[str] = []
    new_dirs: List[str] = []
    opt = _root_opt(root)

    existing = [g for g in GROUPS if read_group(root, g) is not None]
    if existing:
        echo(f"group{'s' if len(existing) > 1 else ''} {', '.join(existing)} exist{'' if len(existing) > 1 else 's'}")
    for group in GROUPS:
        if group in existing:
            continue
        _run(["groupadd", "--system", *opt, group], dry_run, echo, f"create group {group}", f"created group {group}")
        changes.append(f"created group {group}")
        state["groups_created"] = list(dict.fromkeys(state.get("groups_created", []) + [group]))

    if user is None:
        echo("no user to add: run this with sudo from the user's account, or give --user NAME")
    elif user == "root":
        echo("user root needs no group to open probes; give --user NAME for the account that flashes")
    else:
        already = [g for g in GROUPS if is_member(root, user, g)]
        if already:
            echo(f"user {user} is already in {', '.join(already)}")
        for group in GROUPS:
            if group in already:
                continue
            _run(
                ["gpasswd", "--add", user, *opt, group],
                dry_run,
                echo,
                f"add user {user} to {group}",
                f"added user {user} to {group}",
            )
            changes.append(f"added {user} to {group}")
            members = state.setdefault("members_added", {})
            members[group] = sorted(set(members.get(group, [])) | {user})

    rules = packaged_rules_path().read_text()
    target = _inside(root, f"{RULES_DIR}/{RULES_NAME}")
    previous = target.read_text() if target.exists() else None
    if previous == rules:
        echo(f"rules {target} are current")
    else:
        verb, done = ("install", "installed") if previous is None else ("update", "updated")
        changes.append(f"{done} rules {target}")
        if not dry_run:
            new_dirs = _missing_dirs(root, RULES_DIR)
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f".{RULES_NAME}.tmp")
            tmp.write_text(rules)
            os.chmod(tmp, 0o644)
            os.replace(tmp, target)
            if "rules" not in state:  # keep what the first run found
                state["rules"] = {
                    "path": f"/{RULES_DIR}/{RULES_NAME}",
                    "created": previous is None,
                    "previous": previous,
                }
        _say(echo, dry_run, f"{verb} rules {target}", f"{done} rules {target}")

    if changes and not dry_run:
        new_dirs += [
            d for d in _missing_dirs(root, str(Path(STATE_FILE).parent)) if d not in state.get("dirs_created", [])
        ]
        state["dirs_created"] = state.get("dirs_created", []) + new_dirs
        state["version"] = 2
        _save_state(root, state)
    if changes:
        reload_udev(root, dry_run, echo)
    if any(c.startswith("added ") for c in changes):
        echo(
            f"{user} must log out and back in (or reboot) for the new groups to apply; then check with: piflash doctor"
        )
    elif changes:
        echo("check with: piflash doctor")
    else:
        echo("nothing to change")
    return changes


def uninstall_permissions(root: str = "/", dry_run: bool = False, echo: Echo = print) -> List[str]:
    """Revert what :func:`setup_permissions` recorded in ``<root>/var/lib/piflash/permissions.json``.

    Users it added leave the group; the group goes if it created it and nobody else joined
    since; rules it installed are removed (rules it replaced are put back); directories it
    created are removed when empty. Parameters, return value and errors as for
    :func:`setup_permissions`.
    """
    _require_root(dry_run)
    state = _load_state(root)
    if not state:
        echo(f"nothing to undo: no record in {Path(root, STATE_FILE)}")
        return []
    changes: List[str] = []
    opt = _root_opt(root)
    members_added: Dict[str, List[str]] = state.get("members_added", {})
    for group in GROUPS:
        for user in members_added.get(group, []):
            if user in (read_group(root, group) or (0, []))[1]:
                _run(
                    ["gpasswd", "--delete", user, *opt, group],
                    dry_run,
                    echo,
                    f"remove user {user} from {group}",
                    f"removed user {user} from {group}",
                )
                changes.append(f"removed {user} from {group}")
    for group in [g for g in GROUPS if g in state.get("groups_created", [])]:
        entry = read_group(root, group)
        left = [m for m in (entry[1] if entry else []) if m not in members_added.get(group, [])]
        if entry is None:
            echo(f"group {group} is already gone")
        elif left:
            echo(f"group {group} kept: {', '.join(left)} joined it after the setup")
        else:
            _run(["groupdel", *opt, group], dry_run, echo, f"delete group {group}", f"deleted group {group}")
            changes.append(f"deleted group {group}")
    record = state.get("rules")
    if record:
        target = _inside(root, record["path"].lstrip("/"))
        if record.get("previous") is not None:
            if not dry_run:
                target.write_text(record["previous"])
            _say(echo, dry_run, f"restore the previous rules {target}", f"restored the previous rules {target}")
            changes.append(f"restored rules {target}")
        elif record.get("created") and target.exists():
            if not dry_run:
                target.unlink()
            _say(echo, dry_run, f"remove rules {target}", f"removed rules {target}")
            changes.append(f"removed rules {target}")
    if not dry_run:
        _inside(root, STATE_FILE).unlink()
        for rel in reversed(state.get("dirs_created", [])):
            with_root = _inside(root, rel)
            if with_root.is_dir() and not any(with_root.iterdir()):
                with_root.rmdir()
    if any("rules" in c for c in changes):
        reload_udev(root, dry_run, echo)
    return changes


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m piflash.probe.permissions`` (what scripts/setup-probe-permissions.sh runs)."""
    parser = argparse.ArgumentParser(
        prog="setup-probe-permissions.sh",
        description="Let a user open USB debug probes and the Raspberry Pi's SPI and GPIO nodes "
        "without root: the plugdev, spi and gpio groups and piflash's udev rules. Needs root.",
    )
    parser.add_argument("--user", metavar="NAME", help="user to add to plugdev, spi, gpio (default: $SUDO_USER)")
    parser.add_argument("--dry-run", action="store_true", help="print every change, make none")
    parser.add_argument("--uninstall", action="store_true", help="revert what an earlier run changed")
    parser.add_argument("--root", metavar="DIR", default="/", help="work on the root file system in DIR (default: /)")
    args = parser.parse_args(argv)
    try:
        if args.uninstall:
            uninstall_permissions(args.root, args.dry_run)
        else:
            setup_permissions(args.root, args.user, args.dry_run)
    except NeedsRootError as exc:
        script = settings.PIFLASH_SETUP_SCRIPT.value()
        again = " ".join(shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv))
        print(f"error: {exc.message}", file=sys.stderr)
        print(f"hint: run it with sudo: sudo {script} {again}".rstrip(), file=sys.stderr)
        return int(exc.exit_code)
    except PiflashError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        if exc.hint:
            print(f"hint: {exc.hint}", file=sys.stderr)
        return int(exc.exit_code)
    return 0


if __name__ == "__main__":
    sys.exit(main())
