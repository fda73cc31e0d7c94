"""Helpers shared by the tests (imported as ``support.<module>``; pytest puts ``tests/`` on
``sys.path`` because ``tests/`` is not a package): simulated-board servers, station processes,
fake USB trees in sysfs, a udev rules evaluator, unprivileged runs, systemd-nspawn containers."""
