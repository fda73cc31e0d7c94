"""Shell completion, as the README sets it up: the script click generates for bash, loaded into a
real bash, completes commands, subcommands and options of the real CLI."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PIFLASH = Path(sys.executable).parent / "piflash"


@pytest.mark.skipif(not shutil.which("bash") or not PIFLASH.exists(), reason="needs bash and the venv's piflash")
@pytest.mark.parametrize("words, cword, expected", [
    ("piflash fl", 1, "flash"),
    ("piflash sim ''", 2, "board create delete dump fault list plug serve unplug"),
    ("piflash flash --ta", 2, "--target"),
])
def test_bash_completion_from_the_readme(tmp_path, words, cword, expected):
    script = tmp_path / "piflash"          # the README's: generated once into a file
    env = dict(os.environ, PATH=f"{PIFLASH.parent}:{os.environ['PATH']}")
    subprocess.run(["bash", "-c", f"_PIFLASH_COMPLETE=bash_source piflash > {script}"], env=env, check=True)
    probe = (f"source {script}; COMP_WORDS=({words}); COMP_CWORD={cword}; "
             'COMPREPLY=(); _piflash_completion piflash; echo "${COMPREPLY[*]}"')
    proc = subprocess.run(["bash", "-c", probe], env=env, capture_output=True, text=True, timeout=60)
    assert proc.stdout.split() == expected.split(), proc.stderr
