"""docs/ci.md's GitHub Actions workflow, run (issue 45): the ``board`` job's ``run:`` steps in
order, as GitHub's runner runs them on Linux (``bash --noprofile --norc -eo pipefail FILE``, the
job's ``env:`` exported), on a simulated board.

What stands in for GitHub: ``${{ vars.PIFLASH_PROBE }}`` is a simulated board's ID; the
``actions/download-artifact`` step is the test firmware (tests/firmware/boot, ``rtt.elf``, which
prints ``self-test: PASS``) put where that step puts the build job's ``app.elf`` (the ``build``
job's ``make`` is the reader's firmware's own, not run); ``actions/upload-artifact``'s ``path:``
files must exist and hold what the page says: piflash's result and the history row of the flash.
Any other ``${{ }}`` expression in a ``run:`` step or the job's ``env:`` fails the test."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from test_doc_commands import _shims

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "ci.md"
WORKFLOW = ".github/workflows/hil.yml"
#: The repository variables the workflow reads, as the test's runner has them.
VARS = {"PIFLASH_PROBE": "sim:hil-bench"}


def workflow() -> dict:
    """The workflow file docs/ci.md shows (the yaml fence whose first line names it)."""
    for block in re.findall(r"^```yaml\n(.*?)^```", PAGE.read_text(), re.S | re.M):
        if block.startswith(f"# {WORKFLOW}"):
            return yaml.safe_load(block)
    raise AssertionError(f"docs/ci.md shows no {WORKFLOW}")


def expand(text: str, github_run_id: str = "4242") -> str:
    """``text`` with the workflow expressions this test stands in for."""
    text = re.sub(r"\$\{\{\s*vars\.(\w+)\s*\}\}", lambda m: VARS[m.group(1)], text)
    text = re.sub(r"\$\{\{\s*github\.run_id\s*\}\}", github_run_id, text)
    assert "${{" not in text, f"an expression this test does not stand in for: {text}"
    return text


def test_the_workflow_runs_on_the_pi_and_keeps_the_row(tmp_path, firmware_dir, cli):
    flow = workflow()
    job = flow["jobs"]["board"]
    assert "self-hosted" in job["runs-on"] and job["needs"] == "build"
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "home").mkdir()
    _shims(tmp_path / "bin")
    env = {k: v for k, v in os.environ.items() if k not in ("PIFLASH_HISTORY", "XDG_STATE_HOME", "PIFLASH_SIM_USB")}
    env.update(HOME=str(tmp_path / "home"), PATH=f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    env.update({k: expand(str(v)) for k, v in job.get("env", {}).items()})
    cli("sim", "create", VARS["PIFLASH_PROBE"].split(":", 1)[1], "--target", "nrf52840", check=0)

    uploaded = []
    ran = 0
    for step in job["steps"]:
        uses = step.get("uses", "")
        if uses.startswith("actions/download-artifact"):
            into = work / step["with"]["path"]
            into.mkdir(parents=True)
            shutil.copy(firmware_dir / "boot" / "nrf52840" / "rtt.elf", into / "app.elf")
        elif uses.startswith("actions/upload-artifact"):
            assert step.get("if") == "always()", "the row is kept for a failed board too"
            uploaded += [p.strip() for p in step["with"]["path"].splitlines() if p.strip()]
        elif "run" in step:
            script = tmp_path / f"step{ran}.sh"
            script.write_text(expand(step["run"]))
            proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], cwd=work,
                                  env=env, capture_output=True, text=True, timeout=300)
            assert proc.returncode == 0, f"step {step.get('name', ran)!r}: exit {proc.returncode}\n{proc.stderr}"
            ran += 1
        else:
            pytest.fail(f"a step this test does not know: {step}")
    assert ran == 2 and uploaded == ["flash.json", "history-row.json"]

    flash = json.loads((work / "flash.json").read_text())
    assert flash["ok"] and flash["boot_check"]["passed"] and flash["probe_id"] == VARS["PIFLASH_PROBE"]
    row = json.loads((work / "history-row.json").read_text())["operations"]
    assert len(row) == 1 and row[0]["outcome"] == "pass" and row[0]["firmware_sha256"] == flash["firmware_sha256"]
    assert row[0]["boot_check"]["passed"] and row[0]["boot_check"]["output"].endswith("self-test: PASS\n")
