"""Issue 41 item 9: shell completion of target names, probe IDs and profile names, through
click's own mechanism: the script ``_PIFLASH_COMPLETE=bash_source`` prints runs ``piflash`` with
``_PIFLASH_COMPLETE=bash_complete``, ``COMP_WORDS`` and ``COMP_CWORD``, and reads ``TYPE,VALUE``
lines back."""

from __future__ import annotations

import os
import subprocess
import sys

from piflash.sim import SimStore

#: A piflash run as bash's completion function runs it, that prints afterwards (on stderr)
#: whether pyOCD was imported.
_RUN = (
    "import sys\n"
    "from piflash.cli import main\n"
    "try:\n"
    "    main()\n"
    "finally:\n"
    "    print('pyocd imported' if 'pyocd' in sys.modules else 'no pyocd', file=sys.stderr)\n"
    "    print('unicorn imported' if 'unicorn' in sys.modules else 'no unicorn', file=sys.stderr)\n"
)


def _complete(words, heavy=("pyocd",), **env):
    """The values piflash offers for the last of ``words`` (str, as typed) and whether the run
    imported any of the modules ``heavy`` (pyOCD by default)."""
    line = ["piflash", *words.split(" ")]
    proc = subprocess.run(
        [sys.executable, "-c", _RUN],
        env=dict(os.environ, _PIFLASH_COMPLETE="bash_complete", COMP_WORDS=" ".join(line),
                 COMP_CWORD=str(len(line) - 1), **env),
        capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    values = [row.split(",", 1)[1] for row in proc.stdout.splitlines() if row]    # none: one empty line
    return values, any(f"{name} imported" in proc.stderr for name in heavy)


def test_bash_completion_offers_targets_probes_and_profiles(tmp_path):
    SimStore().create("bay7", "nrf52840")
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "line-a.yaml").write_text("target: nrf52840\nfirmware: app.hex\n")
    (profiles / "lamp.yml").write_text("target: nrf52840\nfirmware: app.hex\n")
    env = {"PIFLASH_PROFILE_PATH": str(profiles)}

    targets, _ = _complete("flash -t nrf5284", **env)
    assert "nrf52840" in targets and all(t.startswith("nrf5284") for t in targets)
    probes, _ = _complete("info --probe sim:", **env)
    assert "sim:bay7" in probes
    assert "picoboot" in _complete("erase -u pic", **env)[0]
    names, pyocd = _complete("flash -p l", **env)
    assert names == ["lamp", "line-a"] and not pyocd      # globbed, no YAML, no pyOCD
    assert _complete("profile show li", **env) == (["line-a"], False)


def test_bash_completion_offers_simulated_board_names():
    """Issue 41: the BOARD of every ``sim`` command that takes an existing board completes to the
    boards ``sim list`` lists (bare or as ``sim:NAME``), without importing pyOCD or unicorn."""
    store = SimStore()
    for name in ("tab-nrf", "tab-stm", "other-1"):
        store.create(name, "nrf52840" if name != "tab-stm" else "stm32f103rc")
    store.remove("other-1")                                  # gone: no longer offered

    for command in ("delete", "dump", "fault", "plug", "unplug", "board pull", "board seat", "board swap"):
        names, heavy = _complete(f"sim {command} tab", heavy=("pyocd", "unicorn"))
        assert names == ["tab-nrf", "tab-stm"] and not heavy, command
    assert _complete("sim dump sim:tab-s") == (["sim:tab-stm"], False)
    assert _complete("sim serve --board tab-n")[0] == ["tab-nrf"]
    assert _complete("sim delete other")[0] == []
    assert _complete("sim board swap tab-nrf --uid ")[0] == []  # only the BOARD completes
    assert _complete("sim create tab")[0] == []              # a new board's name is the user's


def test_bash_source_prints_the_script_to_enable_it():
    proc = subprocess.run([sys.executable, "-m", "piflash"], env=dict(os.environ, _PIFLASH_COMPLETE="bash_source"),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "_PIFLASH_COMPLETE=bash_complete" in proc.stdout
