"""The fixtures the station tests share, defined in tests/support/stationkit.py."""

from support.stationkit import stations, store  # noqa: F401
