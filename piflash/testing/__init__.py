"""piflash for other projects' pytest suites (issue 45, docs/ci.md): ``plugin.py``, the pytest
plugin registered through the entry point group ``pytest11`` (named ``piflash.testing.plugin``),
with the ``piflash_board`` fixture and the ``--piflash-probe``/``--piflash-target``/
``--piflash-profile`` options.

May import: ``shared``, ``probe``, ``targets``, ``firmware``, ``record``, ``production``,
``jobs``, ``profiles``: piflash's plain modules, never the click layer; nothing in piflash
imports this package. Third-party: ``pytest``. Loading the plugin imports pytest and nothing
of piflash: every import of piflash (and so of pyOCD) happens inside the fixture's methods, so a
suite that never asks for ``piflash_board`` pays nothing for it.
"""
