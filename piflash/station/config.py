"""The station config: a YAML file saying what a flashing station does (docs/station.md).

::

    # piflash station config
    station: line-1-bay-2      # name recorded in the history (default: the host name)
    profile: nrf52-app         # profile name or path (relative to this file); required
    probes: any                # "any", or a list of probe unique IDs
    on_same_firmware: skip     # skip | reflash (default skip)
    poll_interval: 0.5         # seconds between looks for a probe, a board, its removal
    history: /var/lib/piflash/history.sqlite3   # optional; default piflash.record.history.default_path()
    serials: /var/lib/piflash/serials.sqlite3   # optional; the serial counter (profile 'serial:')
    serial_block: 16           # serial numbers leased at a time (a crash loses at most these)
    protect: profile           # profile | lock | off: read-out protection after a passed verify
    gpio:                      # optional; needs the 'gpio' extra (gpiozero); BCM pin numbers
      pass_led: 17
      fail_led: 27
      busy_led: 22
      buzzer: 23
      button: 24
    bundle: job-v7.pfb         # a signed job bundle instead of 'profile:' (docs/bundles.md)
    allowed_signers: /etc/piflash/allowed_signers   # only signed bundles; a plain profile is refused
    job: ledger:widget-a       # instead of bundle:/profile:, the newest job published to the line in the ledger
    web_port: 8080             # the operator's live page (needs the 'web' extra; docs/station.md)
    web_bind: 127.0.0.1        # the address it listens on; beyond loopback only with web_token_file
    web_token_file: /etc/piflash/web-token   # the token the page asks for (not world-readable)

Loading is as strict as for profiles (it uses the same loader,
:func:`piflash.profiles.read_yaml_mapping`): an unknown key, a wrong type or broken YAML raises
:class:`~piflash.errors.ProfileError` (exit code 5) naming the file, the line and the key. The
profile is loaded and validated too; its own errors name the profile's file. Loading does not
import pyOCD and does not read the firmware; :func:`load_station` does both.
"""

from __future__ import annotations

import dataclasses
import os
import socket
from pathlib import Path
from typing import Any, Dict, List, NoReturn, Optional, Tuple, Union

from piflash import redact, settings
from piflash.errors import BundleError, ProfileError
from piflash.profiles import Profile, find_profile, load_profile, read_yaml_mapping

ALLOWED_KEYS = (
    "station",
    "profile",
    "probes",
    "on_same_firmware",
    "poll_interval",
    "history",
    "gpio",
    "serials",
    "serial_block",
    "protect",
    "workers",
    "ledger",
    "lease_ttl",
    "metrics",
    "metrics_port",
    "bundle",
    "allowed_signers",
    "job",
    "web_port",
    "web_bind",
    "web_token_file",
)
#: How the probes' workers run: threads of the station (the default), or processes of their own,
#: one core each (piflash/station/procs.py).
WORKER_MODES = ("threads", "processes")
#: Station protect policy: what the profile says, or lock / leave open every board regardless.
PROTECT_POLICIES = ("profile", "lock", "off")
#: Bounds of serial_block (numbers per lease).
SERIAL_BLOCK_MAX = 10000
#: What to do with a board whose flash already matches the image.
ON_SAME_FIRMWARE = ("skip", "reflash")
#: GPIO roles and what they drive (gpiozero classes, see piflash.station.status).
GPIO_ROLES = ("pass_led", "fail_led", "busy_led", "buzzer", "button")
#: Bounds of poll_interval, seconds: faster than 20 Hz only loads the probe; slower than a
#: minute makes an operator wait.
POLL_MIN, POLL_MAX = 0.05, 60.0
DEFAULT_POLL = 0.5
#: Where the operator's page listens unless ``web_bind:`` says otherwise: this machine only.
WEB_BIND_DEFAULT = "127.0.0.1"
#: The shortest token a ``web_token_file:`` may hold, in characters: 16 characters of
#: ``openssl rand -hex 16`` are 64 bits, out of reach of guessing over a network.
WEB_TOKEN_MIN = 16


@dataclasses.dataclass(frozen=True)
class StationConfig:
    """One validated station config.

    :ivar path: the config file, resolved.
    :ivar station: station name (str) for the history and the log.
    :ivar profile: the :class:`~piflash.profiles.Profile` every board is flashed with.
    :ivar probes: None for any probe, else a tuple of unique IDs (str).
    :ivar on_same_firmware: ``"skip"`` or ``"reflash"``.
    :ivar poll_interval: seconds (float).
    :ivar history: path of the history database, or None for the default.
    :ivar gpio: role -> BCM pin number (int); empty when GPIO is off.
    :ivar serials: path of the serial database, or None for the default (beside the history).
    :ivar serial_block: serial numbers per lease (int).
    :ivar protect: "lock" to lock every board after a passed verify, else None (from the
        ``protect`` policy and the profile's ``protect:``).
    :ivar workers: ``"threads"`` or ``"processes"`` (:data:`WORKER_MODES`).
    :ivar metrics: the Prometheus textfile to write (:mod:`piflash.station.metrics`), or None.
    :ivar ledger: the central ledger's URL (``postgresql://...``, :mod:`piflash.record.ledger`), or
        None (``$PIFLASH_LEDGER`` when the key is absent).
    :ivar lease_ttl: seconds a serial lease of the ledger lives without a word from this station
        (:mod:`piflash.production.leases`; default a day).
    :ivar metrics_port: TCP port to serve the metrics on for Prometheus to scrape (all
        interfaces, as node_exporter's ``:9100``), or None; with or without ``metrics``.
    :ivar bundle: the verified :class:`piflash.bundle.loader.Bundle` (``bundle:``) whose profile
        is :attr:`profile`, or None for a plain ``profile:``.
    :ivar allowed_signers: the OpenSSH allowed_signers file (``allowed_signers:``), or None; with
        it only a signed bundle is flashed here.
    :ivar job: the line whose newest published job this station runs (``job: ledger:LINE``), or
        None; :attr:`bundle` is then that job, fetched from the ledger and verified.
    :ivar web_port: TCP port of the operator's live page (:mod:`piflash.station.web`), or None.
    :ivar web_bind: the IP address the page listens on (str, default :data:`WEB_BIND_DEFAULT`).
    :ivar web_token_file: the file holding the page's token (``web_token_file:``), or None.
    :ivar web_token: that token (str, never shown: left out of ``repr``), or None.
    """

    path: Path
    station: str
    profile: Profile
    probes: Optional[Tuple[str, ...]]
    on_same_firmware: str = "skip"
    poll_interval: float = DEFAULT_POLL
    history: Optional[Path] = None
    gpio: Dict[str, int] = dataclasses.field(default_factory=dict)
    serials: Optional[Path] = None
    serial_block: int = 16
    protect: Optional[str] = None
    workers: str = "threads"
    ledger: Optional[str] = None
    metrics: Optional[Path] = None
    lease_ttl: float = 86400.0
    metrics_port: Optional[int] = None
    bundle: Optional[Any] = None
    allowed_signers: Optional[Path] = None
    job: Optional[str] = None
    web_port: Optional[int] = None
    web_bind: str = WEB_BIND_DEFAULT
    web_token_file: Optional[Path] = None
    web_token: Optional[str] = dataclasses.field(default=None, repr=False)

    @property
    def serials_path(self) -> Optional[Path]:
        """The serial database: ``serials``, else beside ``history``, else the default."""
        if self.serials is not None:
            return self.serials
        if self.history is not None:
            return self.history.parent / "serials.sqlite3"
        from piflash.production.serials import default_path

        return default_path()


def needed_extras(config: "StationConfig") -> List[str]:
    """The optional extras (keys of :data:`piflash.errors.EXTRAS`) a station config needs:
    ``ledger`` for ``ledger:`` (psycopg), ``metrics`` for ``metrics:`` or ``metrics_port:``
    (prometheus-client), ``gpio`` for ``gpio:`` (gpiozero), ``web`` for ``web_port:`` (Starlette
    and uvicorn), ``pins`` for a ``spidev:`` or ``gpio:`` probe (python-periphery). The ``extras``
    of pyproject.toml."""
    from piflash.probe.pins import GPIO_TAG, SPIDEV_TAG

    needed = []
    if any(p.startswith((SPIDEV_TAG, GPIO_TAG)) for p in config.probes or ()):
        needed.append("pins")
    if config.web_port is not None:
        needed.append("web")
    if config.ledger:
        needed.append("ledger")
    if config.metrics is not None or config.metrics_port is not None:
        needed.append("metrics")
    if config.gpio:
        needed.append("gpio")
    return needed


def check_extras(config: "StationConfig") -> List[str]:
    """Import the module of each extra the config needs (:func:`needed_extras`), as ``station
    run`` will: found is not enough, it must import. Returns the extras checked.

    :raises ExtraMissingError: (exit 17) the first that does not import, with the install line.
    """
    import importlib

    from piflash.errors import EXTRAS, extra_missing

    needed = needed_extras(config)
    for extra in needed:
        try:
            importlib.import_module(EXTRAS[extra][0])
        except ImportError as exc:
            raise extra_missing(extra, str(exc)) from None
    return needed


def _exact_probes(probes: Tuple[str, ...], fail) -> Tuple[str, ...]:
    """The station's ``probes:``, each parsed as a :class:`~piflash.probe.ProbeSelector` and
    written as parsed: a station serves exactly the probes it names, so a prefix (``0240*``, a
    bare ``picoboot``) is refused, and so is a probe named twice (in any case).

    :param fail: the loader's ``fail(key, message, hint)``, which raises ProfileError (exit 5).
    """
    from piflash.errors import PiflashError
    from piflash.probe.selector import ProbeSelector

    out = []
    for text in probes:
        try:
            selector = ProbeSelector.parse(text)
        except PiflashError as exc:
            fail("probes", exc.message, exc.hint)
        if selector.prefix:
            example = "picoboot:1-1.2" if selector.kind.bare else f"{selector.text}..."
            fail(
                "probes",
                f"'{text}' is not one probe: a station matches each probe exactly",
                hint=f"write each probe's whole unique ID ('piflash probes' lists them), e.g. {example}",
            )
        out.append(selector.text)
    lowered = [p.lower() for p in out]
    twice = sorted({p for p in out if lowered.count(p.lower()) > 1})
    if twice:
        fail("probes", f"a probe is listed twice: {', '.join(twice)}")
    return tuple(out)


def load_config(path: Union[str, "os.PathLike[str]"], check_target=None) -> StationConfig:
    """Read and validate a station config and the profile it names.

    :param path: the YAML file.
    :param check_target: passed to :func:`piflash.profiles.load_profile` (validates the target type).
    :raises ProfileError: anything wrong in the config (its file:line:key) or in the profile.
    :raises BundleError: (exit 28) the ``bundle:`` or the ``job:`` is refused (verified here, once
        per load), or ``allowed_signers:`` with a plain ``profile:`` (unsigned firmware).
    :raises LedgerError: (exit 27) the ledger a ``job:`` (or a ``max_boards`` bundle) needs cannot be reached.
    """
    src = os.fspath(path)
    values, lines, root_line = read_yaml_mapping(
        src,
        ALLOWED_KEYS,
        "station config",
        text_keys=("station",),
        empty="station config is empty; it needs at least 'profile'",
    )
    cfile = Path(src).resolve()

    def fail(key: str, message: str, hint: Optional[str] = None) -> NoReturn:
        raise ProfileError(message, path=src, line=lines.get(key.split(".")[0], root_line), key=key, hint=hint)

    allowed = _path_key(values, "allowed_signers", cfile, fail)
    bundle = job = None
    if "job" in values:
        if "profile" in lines or "bundle" in lines:
            fail("job", "give one of 'job:', 'bundle:' and 'profile:': a job is a published bundle")
        bundle, job = _open_job(values, cfile, allowed, check_target, fail)
        profile = bundle.profile
    elif "bundle" in values:
        if "profile" in lines:
            fail("bundle", "give 'bundle:' or 'profile:', not both: a bundle carries its profile")
        bundle = _open_bundle(values, cfile, allowed, check_target, fail)
        profile = bundle.profile
    else:
        if allowed is not None:
            raise BundleError(
                f"{src}: 'allowed_signers' means only signed job bundles are flashed here, and "
                f"{'profile ' + repr(values['profile']) if 'profile' in values else 'no bundle'} is unsigned firmware: refused",
                hint="bundle and sign it (piflash bundle create/sign) and give 'bundle: JOB.pfb' (docs/bundles.md)",
            )
        if "profile" not in values:
            fail(
                "profile",
                "required key is missing" if "profile" not in lines else "must not be empty",
                hint="name a profile (piflash profile list) or give a path to one, or a signed 'bundle:'",
            )
        prof = values["profile"]
        if not isinstance(prof, str) or not prof.strip():
            fail("profile", f"expected a profile name or path, got {prof!r}")
        try:
            profile_path = find_profile(prof, cwd=cfile.parent)
        except ProfileError as exc:
            fail("profile", exc.message, exc.hint)
        profile = load_profile(profile_path, check_target=check_target)

    station = values.get("station", socket.gethostname())
    if not isinstance(station, str) or not station.strip():
        fail("station", f"expected a name, got {station!r}")

    probes = values.get("probes", profile.probe or "any")
    if probes == "any":
        probes = None
    elif isinstance(probes, str):
        probes = (probes,)
    elif isinstance(probes, list) and probes and all(isinstance(p, str) and p.strip() for p in probes):
        probes = tuple(probes)
    else:
        fail(
            "probes",
            f"expected 'any' or a list of probe unique IDs (quoted strings), got {probes!r}",
            hint='e.g. probes: ["0240000032044e45", "sim:bay-2"]',
        )
    if probes is not None:
        probes = _exact_probes(probes, fail)

    same = values.get("on_same_firmware", "skip")
    if same not in ON_SAME_FIRMWARE:
        fail("on_same_firmware", f"must be one of {', '.join(ON_SAME_FIRMWARE)}, got {same!r}")

    poll = values.get("poll_interval", DEFAULT_POLL)
    if isinstance(poll, bool) or not isinstance(poll, (int, float)) or not POLL_MIN <= poll <= POLL_MAX:
        fail("poll_interval", f"expected seconds from {POLL_MIN} to {POLL_MAX:g}, got {poll!r}")

    history = values.get("history")
    if history is not None:
        if not isinstance(history, str) or not history.strip():
            fail("history", f"expected a file path, got {history!r}")
        history = (cfile.parent / Path(history).expanduser()).resolve()

    gpio = values.get("gpio") or {}
    if not isinstance(gpio, dict):
        fail("gpio", f"expected a mapping of role to pin number, got {gpio!r}")
    pins: Dict[str, int] = {}
    for role, pin in gpio.items():
        if role not in GPIO_ROLES:
            fail(f"gpio.{role}", f"unknown GPIO role; known: {', '.join(GPIO_ROLES)}")
        if isinstance(pin, bool) or not isinstance(pin, int) or not 0 <= pin <= 27:
            fail(f"gpio.{role}", f"expected a BCM GPIO number 0..27, got {pin!r}")
        if pin in pins.values():
            fail(f"gpio.{role}", f"GPIO {pin} is used twice")
        pins[role] = pin

    serials = values.get("serials")
    if serials is not None:
        if not isinstance(serials, str) or not serials.strip():
            fail("serials", f"expected a file path, got {serials!r}")
        serials = (cfile.parent / Path(serials).expanduser()).resolve()
    block = values.get("serial_block", 16)
    if isinstance(block, bool) or not isinstance(block, int) or not 1 <= block <= SERIAL_BLOCK_MAX:
        fail("serial_block", f"expected a count of numbers from 1 to {SERIAL_BLOCK_MAX}, got {block!r}")
    policy = values.get("protect", "profile")
    if policy is False:  # YAML 1.1 reads a bare `off` as false
        policy = "off"
    if policy not in PROTECT_POLICIES:
        fail("protect", f"must be one of {', '.join(PROTECT_POLICIES)}, got {policy!r}")
    protect = profile.protect if policy == "profile" else ("lock" if policy == "lock" else None)
    if protect == "lock" and not profile.verify:
        fail("protect", f"boards are locked only after a passed verify, and profile {profile.name} has 'verify: false'")

    workers = values.get("workers", "threads")
    if workers not in WORKER_MODES:
        fail("workers", f"must be one of {', '.join(WORKER_MODES)}, got {workers!r}")
    if workers == "processes" and pins:
        fail(
            "workers",
            "worker processes do not drive GPIO yet: the LEDs, buzzer and button need 'workers: threads'",
            hint="remove 'gpio', or 'workers: processes'",
        )
    ledger = values.get("ledger", settings.PIFLASH_LEDGER.value())
    if ledger is not None and not redact.is_conninfo(ledger):
        shown = redact.redact_conninfo(ledger) if isinstance(ledger, str) else ledger
        fail(
            "ledger",
            f"expected a PostgreSQL URL (postgresql://USER@HOST[:PORT]/DATABASE, or libpq's "
            f"'host=H dbname=D ...'), got {shown!r}",
        )
    redact.remember(ledger)
    metrics = values.get("metrics")
    if metrics is not None:
        if not isinstance(metrics, str) or not metrics.strip().endswith(".prom"):
            fail("metrics", f"expected the path of a .prom file (node_exporter reads *.prom), got {metrics!r}")
        metrics = (cfile.parent / Path(metrics).expanduser()).resolve()
        if not metrics.parent.is_dir():
            fail(
                "metrics",
                f"the folder {metrics.parent} does not exist",
                hint="node_exporter's --collector.textfile.directory, e.g. /var/lib/prometheus/node-exporter",
            )
    ttl = values.get("lease_ttl", 86400)
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not 1 <= ttl <= 30 * 86400:
        fail("lease_ttl", f"expected seconds from 1 to {30 * 86400} (30 days), got {ttl!r}")
    port = values.get("metrics_port")
    if port is not None and (isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535):
        fail(
            "metrics_port",
            f"expected a TCP port (1-65535), got {port!r}",
            hint="9100 is node_exporter's; pick a free one for the station, e.g. 9810",
        )
    web_port, web_bind, token_file, token = _web_keys(values, lines, cfile, fail)
    return StationConfig(
        path=cfile,
        station=station.strip(),
        profile=profile,
        probes=probes,
        on_same_firmware=same,
        poll_interval=float(poll),
        history=history,
        gpio=pins,
        serials=serials,
        serial_block=block,
        protect=protect,
        workers=workers,
        ledger=ledger,
        metrics=metrics,
        lease_ttl=float(ttl),
        metrics_port=port,
        bundle=bundle,
        allowed_signers=allowed,
        job=job,
        web_port=web_port,
        web_bind=web_bind,
        web_token_file=token_file,
        web_token=token,
    )


def _web_keys(values: dict, lines: dict, cfile: Path, fail) -> Tuple[Optional[int], str, Optional[Path], Optional[str]]:
    """The operator's page keys: ``web_port``, ``web_bind``, ``web_token_file`` (issue 44).

    Returns (port or None, bind address, token file or None, token or None). The page binds to
    loopback unless ``web_bind:`` names another address, which needs ``web_token_file:``: a file
    of one token (at least :data:`WEB_TOKEN_MIN` characters) that others cannot read (no
    ``o+r``: a token everyone on the Pi can read guards nothing). The token is never put in a
    message, and :func:`piflash.redact.remember_secret` masks it in any log line. Its characters are
    those of a cookie value without quoting (RFC 6265 section 4.1.1): letters, digits, ``._~+/=-``.

    :raises ProfileError: (exit 5) a key is malformed, or the token file is missing, readable by
        all, or too short.
    """
    import ipaddress
    import stat

    port = values.get("web_port")
    if port is not None and (isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535):
        fail("web_port", f"expected a TCP port (1-65535), got {port!r}", hint="e.g. web_port: 8080")
    bind = values.get("web_bind", WEB_BIND_DEFAULT)
    try:
        address = ipaddress.ip_address(bind if isinstance(bind, str) else "-")
    except ValueError:
        fail(
            "web_bind",
            f"expected an IP address to listen on, got {bind!r}",
            hint="127.0.0.1 (this machine only, the default), 0.0.0.0 (every interface) or one of the Pi's addresses",
        )
    token_file = _path_key(values, "web_token_file", cfile, fail)
    for key in ("web_bind", "web_token_file"):
        if key in lines and port is None:
            fail(key, "the operator's page is served only with 'web_port:'", hint="add e.g. web_port: 8080")
    token = None
    if token_file is not None:
        try:
            st = token_file.stat()
            text = token_file.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            fail("web_token_file", f"cannot read {token_file}: {getattr(exc, 'strerror', None) or exc}")
        if st.st_mode & stat.S_IROTH:
            fail(
                "web_token_file",
                f"{token_file} is readable by every user (mode {stat.S_IMODE(st.st_mode):04o}): refused",
                hint=f"chmod 600 {token_file} (or 640 with the station's group)",
            )
        if len(text) < WEB_TOKEN_MIN or not all(c.isascii() and (c.isalnum() or c in "._~+/=-") for c in text):
            fail(
                "web_token_file",
                f"{token_file} must hold one token of at least {WEB_TOKEN_MIN} characters: letters, digits "
                "and ._~+/=- (it travels in a cookie)",
                hint=f"e.g. openssl rand -hex 16 > {token_file}",
            )
        redact.remember_secret(text)
        token = text
    if not address.is_loopback and token is None:
        fail(
            "web_bind",
            f"the page would be open to the network on {bind} without a token: refused",
            hint="give 'web_token_file:' (a file with a token, mode 600), or leave web_bind at 127.0.0.1",
        )
    return port, str(address), token_file, token


def bundle_path(path: Union[str, "os.PathLike[str]"]) -> Optional[Path]:
    """The config's ``bundle:`` file (resolved against the config's folder), or None; the YAML is
    read, nothing verified.

    :raises ProfileError: (exit 5) the config cannot be read or its ``bundle`` is not a path.
    """
    src = os.fspath(path)
    values, lines, root_line = read_yaml_mapping(src, ALLOWED_KEYS, "station config", text_keys=("station",))

    def fail(key: str, message: str, hint: Optional[str] = None) -> NoReturn:
        raise ProfileError(message, path=src, line=lines.get(key, root_line), key=key, hint=hint)

    return _path_key(values, "bundle", Path(src).resolve(), fail)


def history_path(path: Union[str, "os.PathLike[str]"]) -> Optional[Path]:
    """The history the station of config ``path`` opens: its ``history:`` (resolved against the
    config's folder), else :func:`piflash.record.history.default_path`; the YAML is read, no
    profile or bundle (``piflash station status`` finds the status file beside it).

    :raises ProfileError: (exit 5) the config cannot be read or its ``history`` is not a path.
    """
    from piflash.record.history import default_path

    src = os.fspath(path)
    values, lines, root_line = read_yaml_mapping(src, ALLOWED_KEYS, "station config", text_keys=("station",))

    def fail(key: str, message: str, hint: Optional[str] = None) -> NoReturn:
        raise ProfileError(message, path=src, line=lines.get(key, root_line), key=key, hint=hint)

    return _path_key(values, "history", Path(src).resolve(), fail) or default_path()


def has_job(path: Union[str, "os.PathLike[str]"]) -> bool:
    """Whether the config has a ``job:`` (its YAML read, nothing fetched).

    :raises ProfileError: (exit 5) the config cannot be read."""
    values, _, _ = read_yaml_mapping(os.fspath(path), ALLOWED_KEYS, "station config", text_keys=("station",))
    return "job" in values


def pin_uses(path: Union[str, "os.PathLike[str]"]) -> Tuple[Tuple[str, ...], Dict[str, int]]:
    """The config's ``probes:`` (probe IDs as written; none for ``any``) and ``gpio:`` pins
    (role -> BCM GPIO, whole numbers only), read without loading its profile or checking its
    probe IDs, for the pin checks of ``piflash doctor`` and ``piflash setup pins`` (issue 43).

    :raises ProfileError: (exit 5) the config cannot be read, or is not a station config."""
    values, _, _ = read_yaml_mapping(os.fspath(path), ALLOWED_KEYS, "station config", text_keys=("station",))
    probes = values.get("probes")
    ids = tuple(str(p) for p in probes) if isinstance(probes, list) else ()
    gpio = values.get("gpio")
    pins = (
        {str(k): v for k, v in gpio.items() if isinstance(v, int) and not isinstance(v, bool)}
        if isinstance(gpio, dict)
        else {}
    )
    return ids, pins


def _path_key(values: dict, key: str, cfile: Path, fail) -> Optional[Path]:
    """The file path of ``key`` (relative to the config's folder), or None when absent."""
    value = values.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        fail(key, f"expected a file path, got {value!r}")
    return (cfile.parent / Path(value).expanduser()).resolve()


def _open_job(values: dict, cfile: Path, allowed: Optional[Path], check_target, fail):
    """Fetch the newest job published for the config's ``job: ledger:LINE`` from its ledger
    (:func:`piflash.bundle.jobs.fetch_job`, into ``jobs/`` beside the history) and verify it as a
    ``bundle:`` (:func:`_open_bundle`). Returns (the bundle, LINE).

    :raises ProfileError: (exit 5) a malformed ``job:``, or no ``ledger:``/``allowed_signers:``.
    :raises BundleError: (exit 28) no job published, or the job is refused (a rollback included).
    :raises LedgerError: (exit 27) the ledger cannot be reached."""
    from piflash.bundle.jobs import fetch_job, parse_job
    from piflash.bundle.rollback import state_path

    try:
        line = parse_job(values["job"])
    except ValueError as exc:
        fail("job", str(exc))
    ledger = values.get("ledger", settings.PIFLASH_LEDGER.value())
    if not isinstance(ledger, str) or not ledger:
        fail("job", "a job published to the line is taken from the ledger: give 'ledger:' (or PIFLASH_LEDGER)")
    if allowed is None:
        fail("job", "a job published to the line is verified: give 'allowed_signers:'")
    path = fetch_job(ledger, line, state_path(_path_key(values, "history", cfile, fail)).parent / "jobs")
    bundle = _open_bundle(values, cfile, allowed, check_target, fail, path=path)
    if bundle.manifest.line != line:
        bundle.close()
        raise BundleError(
            f"{path}: the ledger's job for line {line} is a bundle of line {bundle.manifest.line}: refused"
        )
    return bundle, line


def _open_bundle(values: dict, cfile: Path, allowed: Optional[Path], check_target, fail, path: Optional[Path] = None):
    """Verify the config's ``bundle:`` (:func:`piflash.bundle.loader.open_bundle`) against
    ``allowed`` (``allowed_signers:``), its rollback state beside the station's history.

    :raises BundleError: (exit 28) the bundle is refused.
    """
    import socket

    from piflash.bundle.loader import open_bundle
    from piflash.bundle.rollback import state_path

    path = path or _path_key(values, "bundle", cfile, fail)
    assert path is not None  # called only when the key is given
    history = _path_key(values, "history", cfile, fail)
    ledger = values.get("ledger", settings.PIFLASH_LEDGER.value())
    return open_bundle(
        path,
        allowed,
        ledger=ledger if isinstance(ledger, str) else None,
        state=state_path(history),
        check_target=check_target,
        holder=str(values.get("station") or socket.gethostname()),  # the station's name, as the ledger's rows
    )


@dataclasses.dataclass(frozen=True)
class LoadedStation:
    """A station config with its firmware image loaded and checked.

    :ivar config: the :class:`StationConfig`.
    :ivar image: the :class:`~piflash.firmware.image.FirmwareImage` every board gets.
    """

    config: StationConfig
    image: Any


def load_station(path: Union[str, "os.PathLike[str]"]) -> LoadedStation:
    """Load the config, validate the profile's target type (imports pyOCD), load the firmware
    and check it against the profile's SHA-256 and the target's flash.

    :raises ProfileError: (exit 5), FirmwareError (3), ChecksumError (6), ImageRangeError (4),
        BundleError (28: the ``bundle:`` refused, or a plain profile with ``allowed_signers:``).
    """
    from piflash.targets.catalog import check_target

    config = load_config(path, check_target=check_target)
    if config.bundle is not None:
        return LoadedStation(config, config.bundle.load_image())
    return LoadedStation(config, config.profile.load_image())


__all__ = [
    "bundle_path",
    "history_path",
    "has_job",
    "pin_uses",
    "StationConfig",
    "LoadedStation",
    "load_config",
    "load_station",
    "ALLOWED_KEYS",
    "WORKER_MODES",
    "ON_SAME_FIRMWARE",
    "GPIO_ROLES",
    "PROTECT_POLICIES",
    "WEB_BIND_DEFAULT",
]
