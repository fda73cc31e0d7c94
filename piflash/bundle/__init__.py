"""Job bundles: approved firmware only (docs/bundles.md).

Owns the job bundle ``JOB.pfb``: a ustar archive holding ``manifest.json`` (line, version,
target, every file's size and SHA-256), its OpenSSH signature ``manifest.json.sig`` (namespace
``piflash-bundle``), the profile and the firmware. :mod:`~piflash.bundle.archive` writes and reads
the archive defensively (in memory, bounded by :mod:`piflash.limits`), :mod:`~piflash.bundle.manifest`
the manifest, :mod:`~piflash.bundle.signing` signs and verifies through ``ssh-keygen -Y``,
:mod:`~piflash.bundle.rollback` keeps the last version each line accepted on this machine,
:mod:`~piflash.bundle.counts` counts a ``max_boards`` bundle's boards in the ledger,
:mod:`~piflash.bundle.jobs` publishes bundles to the line in the ledger and fetches the newest, and
:mod:`~piflash.bundle.loader` turns a verified bundle into a profile and an image stamped with the
bundle's SHA-256 and version. Every refusal is a :class:`~piflash.errors.BundleError` (exit 28),
raised before any probe is opened.

May import: the shared modules, :mod:`piflash.targets`, :mod:`piflash.firmware`,
:mod:`piflash.record` (the history's path, the ledger), :mod:`piflash.profiles`, PyYAML (lazily). Never the programming engine, the jobs, the station or
the CLI.
"""
