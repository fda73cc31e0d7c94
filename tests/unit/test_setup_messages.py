"""What `piflash setup permissions` says, on a small fake root (no debootstrap, no root needed).

The full setup against a real Debian root is in test_setup_root.py (root, slow); this checks the
words of every change message: each is a real English past tense ("installed", never
"installd"), for each kind of change the setup makes to files it can make without root tools.
"""

from __future__ import annotations

import os
import re

import pytest

from piflash.probe import permissions, probetable


@pytest.fixture
def fake_root(tmp_path, monkeypatch):
    """A root with user alice already in plugdev, spi and gpio, so no groupadd/gpasswd runs: only the rules
    file changes. Not being root, the check that refuses non-root runs is bypassed (the files
    written are all under tmp_path)."""
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "etc/passwd").write_text("root:x:0:0::/root:/bin/bash\nalice:x:1000:1000::/home/alice:/bin/bash\n")
    (root / "etc/group").write_text("root:x:0:\nplugdev:x:46:alice\nspi:x:999:alice\ngpio:x:997:alice\nalice:x:1000:\n")
    if os.geteuid() != 0:
        monkeypatch.setattr(permissions.os, "geteuid", lambda: 0)
    return root


def run(root, **kw):
    said = []
    changes = permissions.setup_permissions(str(root), user="alice", echo=said.append, **kw)
    return changes, said


def past_tense_ok(lines):
    """No verb made past by gluing a 'd' on its stem ('installd', 'addd')."""
    text = "\n".join(lines)
    return not re.search(r"\b(installd|addd|uninstalld)\b", text)


def test_change_messages_are_english(fake_root):
    _, dry = run(fake_root, dry_run=True)
    assert any(line.startswith("would install rules ") for line in dry), dry

    changes, said = run(fake_root)
    rules = fake_root / "etc/udev/rules.d" / probetable.RULES_NAME
    assert changes == [f"installed rules {rules}"], changes
    assert f"installed rules {rules}" in said and past_tense_ok(said), said

    rules.write_text("# an older piflash\n")
    changes, said = run(fake_root)
    assert changes == [f"updated rules {rules}"] and f"updated rules {rules}" in said, said
    assert past_tense_ok(said + changes)

    changes, said = run(fake_root)
    assert changes == [] and "nothing to change" in said

    changes, said = [], []
    changes = permissions.uninstall_permissions(str(fake_root), echo=said.append)
    assert past_tense_ok(said + changes), said


def test_a_version_1_record_is_still_undone(fake_root):
    """A record written before the spi and gpio groups (plugdev only, "group_created" and
    "users_added") is read as the new one: its user leaves plugdev, its group goes, nothing else."""
    import json

    state = fake_root / permissions.STATE_FILE
    state.parent.mkdir(parents=True)
    state.write_text(json.dumps({"version": 1, "group_created": True, "users_added": ["alice"]}))
    said = []
    changes = permissions.uninstall_permissions(str(fake_root), dry_run=True, echo=said.append)
    assert changes == ["removed alice from plugdev", "deleted group plugdev"], said
    assert not any("spi" in line or "gpio" in line for line in said), said
