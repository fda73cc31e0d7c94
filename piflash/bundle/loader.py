"""Make, sign, read and verify job bundles: the functions the CLI and the station call.

:func:`open_bundle` is the one gate: it reads the archive in memory, verifies the signature over
the manifest, checks every file against it, the target and the line's last version, and only
then writes the verified files into a private temporary folder (mode 0700) to load the profile
and the firmware from. Any refusal is a :class:`~piflash.errors.BundleError` (exit 28) before a
probe is opened. Verification runs once per call: a station calls it once per load, not per board.
"""

from __future__ import annotations

import atexit
import dataclasses
import hashlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

from piflash.bundle.archive import check_name, read_archive, read_file, write_archive
from piflash.bundle.counts import BoardCount
from piflash.bundle.manifest import (
    MANIFEST,
    SIGNATURE,
    Manifest,
    check_files,
    check_line,
    file_entry,
    parse_manifest,
)
from piflash.bundle.rollback import LineVersions, state_path
from piflash.bundle.signing import sign, verify
from piflash.errors import BundleError

PathLike = Union[str, "os.PathLike[str]"]

#: A bundle's file name ends so; ``piflash flash JOB.pfb`` knows a bundle by it.
SUFFIX = ".pfb"


def is_bundle(path: Optional[PathLike]) -> bool:
    """Whether ``path`` names a job bundle (its suffix is :data:`SUFFIX`, any case)."""
    return path is not None and os.fspath(path).lower().endswith(SUFFIX)


@dataclasses.dataclass
class Bundle:
    """A verified bundle, ready to flash.

    :ivar path: the ``.pfb`` file.
    :ivar sha256: SHA-256 of the whole file (64 hex digits), recorded as ``bundle_sha256``.
    :ivar manifest: its :class:`~piflash.bundle.manifest.Manifest`.
    :ivar signer: the principal its signature verified as (from the allowed signers file).
    :ivar profile: the bundled :class:`~piflash.profiles.Profile`, loaded from :attr:`directory`.
    :ivar image: the firmware :class:`~piflash.firmware.image.FirmwareImage`, stamped with
        ``bundle_sha256`` and ``bundle_version``, once :meth:`load_image` ran (else None).
    :ivar directory: the private folder the verified files were written to (removed by :meth:`close`
        or at exit).
    :ivar count: the count limit (:class:`~piflash.bundle.counts.BoardCount`) when the manifest has
        ``max_boards``: each board takes a turn before it is written and settles it after.
    """

    path: Path
    sha256: str
    manifest: Manifest
    signer: str
    profile: Any
    image: Any
    directory: Optional[Path]
    count: Optional[BoardCount] = None

    def close(self) -> None:
        """Remove :attr:`directory` (and close the count's ledger connection)."""
        if self.count is not None:
            self.count.close()
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)

    def load_image(self):
        """Load, parse and check the firmware as :meth:`piflash.profiles.Profile.load_image` does
        (imports pyOCD for the target's flash map), stamped with ``bundle_sha256`` and
        ``bundle_version``; kept in :attr:`image`.

        :raises FirmwareError, ChecksumError, ImageRangeError: the signed firmware is unusable.
        """
        if self.image is None:
            image = self.profile.load_image()
            self.image = dataclasses.replace(image, bundle_sha256=self.sha256, bundle_version=self.manifest.version)
        return self.image

    def to_dict(self) -> Dict[str, Any]:
        """``bundle verify --json``: ``bundle`` (path), ``bundle_sha256``, ``bundle_version``,
        ``line``, ``target``, ``signer``, ``max_boards``, ``files``, ``piflash_version``, ``verified`` (true)."""
        return describe(self.path, self.sha256, self.manifest, signed=True) | {"signer": self.signer, "verified": True}


def describe(path: PathLike, sha256: str, manifest: Manifest, signed: bool) -> Dict[str, Any]:
    """A bundle as ``bundle show --json`` prints it (docs/bundles.md)."""
    return {
        "bundle": os.path.abspath(path),
        "bundle_sha256": sha256,
        "bundle_version": manifest.version,
        "line": manifest.line,
        "target": manifest.target,
        "profile": manifest.profile,
        "max_boards": manifest.max_boards,
        "piflash_version": manifest.piflash_version,
        "files": [dataclasses.asdict(f) for f in manifest.files],
        "signed": signed,
    }


def _profile_member(profile) -> Tuple[str, bytes, List[Tuple[str, bytes]]]:
    """The bundled profile's name and YAML, and the files it names (firmware, packs): the
    profile's own keys with ``firmware`` and ``pack`` as plain names in the bundle, ``sha256``
    pinned to the firmware, and no ``probe`` (each station names its own probes)."""
    import yaml

    from piflash.profiles import ALLOWED_KEYS, read_yaml_mapping

    values, _, _ = read_yaml_mapping(str(profile.path), ALLOWED_KEYS, "profile", text_keys=("probe", "sha256"))
    files: List[Tuple[str, bytes]] = []

    def take(path: Path, what: str) -> str:
        name = check_name(path.name, f"{what} {path}")
        if any(n == name for n, _ in files):
            raise BundleError(f"two files of profile {profile.path} are named {name}: a bundle holds plain names")
        try:
            files.append((name, path.read_bytes()))
        except OSError as exc:
            raise BundleError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
        return name

    values["firmware"] = take(profile.firmware, "firmware")
    values["sha256"] = hashlib.sha256(files[0][1]).hexdigest()
    if profile.pack:
        values["pack"] = [take(Path(p), "pack") for p in profile.pack]
    values.pop("probe", None)
    name = check_name(f"{profile.name}.yaml", "profile")
    if any(n == name for n, _ in files):
        raise BundleError(f"the profile's name {name} is also the name of one of its files")
    text = "# piflash profile, bundled (piflash bundle create)\n" + yaml.safe_dump(values, sort_keys=False)
    return name, text.encode("utf-8"), files


def create_bundle(
    profile: PathLike, out: PathLike, line: str, version: int, max_boards: Optional[int] = None
) -> Tuple[Manifest, str]:
    """Write the unsigned bundle ``out`` of ``profile`` (a name or path) for ``line``, ``version``.

    The profile and its firmware are checked first as ``piflash flash -p`` would (target type,
    firmware parsed, SHA-256, fit in flash).

    :returns: ``(manifest, sha256 of the written file)``.
    :raises ProfileError, FirmwareError, ChecksumError, ImageRangeError: the profile or its firmware.
    :raises BundleError: (exit 28) a bad line name, version or count, a file name a bundle cannot
        hold, or too large a bundle.
    :raises ValueError: ``version`` or ``max_boards`` not a whole number from 1.
    """
    from piflash import __version__
    from piflash.bundle.manifest import MAX_INT
    from piflash.profiles import find_profile, load_profile
    from piflash.targets.catalog import check_target

    try:
        check_line(line)
    except ValueError as exc:
        raise BundleError(str(exc)) from None
    for what, n in (("version", version), ("max_boards", max_boards)):
        if n is not None and not 1 <= n <= MAX_INT:
            raise BundleError(f"{what} must be a whole number from 1 to {MAX_INT}, not {n}")
    prof = load_profile(find_profile(os.fspath(profile)), check_target=check_target)
    prof.load_image()
    name, text, files = _profile_member(prof)
    members = [(name, text), *files]
    manifest = Manifest(
        line=line,
        version=version,
        target=prof.target,
        profile=name,
        files=tuple(file_entry(n, d) for n, d in members),
        piflash_version=__version__,
        max_boards=max_boards,
    )
    raw = _write(out, manifest.to_bytes(), None, members)
    return manifest, hashlib.sha256(raw).hexdigest()


def _write(out: PathLike, manifest: bytes, signature: Optional[bytes], members) -> bytes:
    parts = [(MANIFEST, manifest)] + ([(SIGNATURE, signature)] if signature is not None else []) + list(members)
    try:
        return write_archive(out, parts)
    except OSError as exc:
        raise BundleError(f"cannot write bundle {out}: {exc.strerror or exc}") from None


def _read(path: PathLike) -> Tuple[bytes, Dict[str, bytes]]:
    raw = read_file(path)
    members = read_archive(raw, os.fspath(path))
    if MANIFEST not in members:
        raise BundleError(f"{path}: no manifest.json: not a piflash bundle")
    return raw, members


def sign_bundle(path: PathLike, key: PathLike) -> Tuple[Manifest, str]:
    """Sign ``path``'s manifest with the OpenSSH private key ``key`` and write the signature into
    the bundle (replacing one it had).

    :returns: ``(manifest, sha256 of the signed file)``.
    :raises BundleError: (exit 28) not a bundle, a manifest that does not match its files, or
        signing failed (:func:`piflash.bundle.signing.sign`).
    """
    where = os.fspath(path)
    _, members = _read(path)
    manifest = parse_manifest(members[MANIFEST], where)
    check_files(manifest, members, where)
    signature = sign(members[MANIFEST], key)
    files = [(f.path, members[f.path]) for f in manifest.files]
    raw = _write(path, members[MANIFEST], signature, files)
    return manifest, hashlib.sha256(raw).hexdigest()


def show_bundle(path: PathLike) -> Dict[str, Any]:
    """What ``path`` says it holds (:func:`describe`), without checking its signature: read
    and checked for form (archive, manifest, files against the manifest) only.

    :raises BundleError: (exit 28) not a well-formed bundle.
    """
    where = os.fspath(path)
    raw, members = _read(path)
    manifest = parse_manifest(members[MANIFEST], where)
    check_files(manifest, members, where)
    return describe(path, hashlib.sha256(raw).hexdigest(), manifest, signed=SIGNATURE in members) | {"verified": False}


_DIRS: List[Path] = []


@atexit.register
def _remove_dirs() -> None:
    for d in _DIRS:
        shutil.rmtree(d, ignore_errors=True)


def open_bundle(
    path: PathLike,
    allowed_signers: Optional[PathLike],
    *,
    target: Optional[str] = None,
    ledger: Optional[str] = None,
    state: Optional[PathLike] = None,
    accept: bool = True,
    load: bool = True,
    check_target: Optional[Callable[..., str]] = None,
    holder: Optional[str] = None,
) -> Bundle:
    """Verify the bundle ``path`` and load its profile and firmware: the gate every bundle goes through.

    In order: readable and well-formed (:func:`~piflash.bundle.archive.read_archive`), signed,
    signed by a key of ``allowed_signers`` for namespace ``piflash-bundle``, every file as the
    signed manifest lists it (none changed, missing or extra), the profile's target the manifest's
    and ``target``'s, a count limit (``max_boards``) only with a ledger and with a place left in
    its count (:class:`~piflash.bundle.counts.BoardCount`), the profile loaded from the verified files, and the version not older than its line's last accepted here (then, with ``accept``, remembered).

    :param allowed_signers: OpenSSH's allowed_signers file; None refuses (nothing is taken unverified).
    :param target: the target the command line names (``-t``), if any.
    :param ledger: the ledger URL in use, if any: where a ``max_boards`` bundle's boards are counted.
    :param state: the rollback state file (default :func:`~piflash.bundle.rollback.state_path`).
    :param accept: remember this version as the line's last (False: ``bundle verify`` only looks).
    :param load: write the verified files out and load the profile (False: verify only;
        ``profile`` None). The firmware is loaded by :meth:`Bundle.load_image`.
    :param check_target: passed to :func:`piflash.profiles.load_profile` (e.g.
        :func:`piflash.targets.catalog.check_target`, which imports pyOCD), or None.
    :param holder: who flashes, recorded with each board's turn (a station's name; default
        ``one-off:HOST``).
    :returns: a :class:`Bundle`.
    :raises BundleError: (exit 28) each refusal, naming why.
    :raises LedgerError: (exit 27) a ``max_boards`` bundle's ledger cannot be reached.
    :raises ProfileError, FirmwareError, ChecksumError, ImageRangeError: the bundled profile or
        firmware is invalid although signed.
    """
    where = os.fspath(path)
    if allowed_signers is None:
        raise BundleError(
            f"{where}: a bundle is only taken verified: give the allowed signers (--allowed-signers FILE)",
            hint="OpenSSH's allowed_signers format: 'PRINCIPAL namespaces=\"piflash-bundle\" ssh-ed25519 AAAA...'",
        )
    raw, members = _read(path)
    sha256 = hashlib.sha256(raw).hexdigest()
    if SIGNATURE not in members:
        raise BundleError(
            f"{where}: unsigned (no manifest.json.sig): refused", hint="piflash bundle sign JOB.pfb -k KEY"
        )
    signer = verify(members[MANIFEST], members[SIGNATURE], allowed_signers, where)
    manifest = parse_manifest(members[MANIFEST], where)
    check_files(manifest, members, where)
    if target is not None and target.lower() != manifest.target.lower():
        raise BundleError(f"{where}: the bundle is for target {manifest.target}, not {target}: refused")
    count = None
    if manifest.max_boards is not None:
        if not ledger:
            raise BundleError(
                f"{where}: the bundle allows at most {manifest.max_boards} boards across line "
                f"{manifest.line} and there is no ledger to count the line's boards in (--ledger, a station's "
                "ledger:, $PIFLASH_LEDGER): refused"
            )
        if holder is None:
            import socket

            holder = f"one-off:{socket.gethostname()}"
        count = BoardCount(ledger, manifest.line, sha256, manifest.version, manifest.max_boards, holder)
        count.check(where)
    versions = LineVersions(state if state is not None else state_path())
    try:
        versions.check(manifest.line, manifest.version, sha256, where, accept=False)
        profile = image = directory = None
        if load:
            directory = Path(tempfile.mkdtemp(prefix="piflash-bundle-"))  # mode 0700
            _DIRS.append(directory)
            profile = _load(manifest, members, directory, where, check_target)
        if accept:
            versions.check(manifest.line, manifest.version, sha256, where, accept=True)
    finally:
        versions.close()
    return Bundle(Path(path), sha256, manifest, signer, profile, image, directory, count)


def _load(manifest: Manifest, members: Dict[str, bytes], directory: Path, where: str, check_target):
    """Write the verified files into ``directory`` and load the profile."""
    from piflash.profiles import load_profile

    for f in manifest.files:
        (directory / f.path).write_bytes(members[f.path])
    profile = load_profile(directory / manifest.profile, check_target=check_target)
    inside = [profile.firmware, *(Path(p) for p in (profile.pack or ()))]
    for p in inside:
        if p.parent != directory.resolve() or p.name not in {f.path for f in manifest.files}:
            raise BundleError(f"{where}: the bundled profile names {p}, which is not one of the bundle's files")
    if profile.target.lower() != manifest.target.lower():
        raise BundleError(f"{where}: the manifest says target {manifest.target}, its profile {profile.target}: refused")
    return profile
