"""Passwords out of everything piflash shows or records: connection strings and error texts.

A ledger's connection string (:mod:`piflash.record.ledger`) may hold its password in any of
libpq's forms ("Connection Strings" in PostgreSQL's libpq documentation): the URI's userinfo
(``postgresql://u:PW@h/db``), the URI's query (``postgresql://u@h/db?password=PW``) or the
keyword/value form (``host=h password=PW dbname=d``, a value possibly quoted). Every message,
log line, history row and terminal line that names a connection string goes through
:func:`redact_conninfo`; every text that may quote one (a libpq error echoes the URI it could not
parse) goes through :func:`scrub`, which also replaces each password :func:`remember` was told
of, wherever it appears.

The parsers are kept ones: psycopg's :func:`psycopg.conninfo.conninfo_to_dict` (libpq's own
``PQconninfoParse``) finds the secrets of any form (psycopg imported lazily: it is the
``ledger`` extra), :mod:`urllib.parse` for URIs (so the shown string keeps the user's form). A
string neither parses is masked by the patterns of :func:`scrub`.
"""

from __future__ import annotations

import re
import threading
from typing import List, Optional, Set
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

__all__ = [
    "MASK",
    "SECRET_KEYS",
    "is_conninfo",
    "passwords_in",
    "redact_conninfo",
    "remember",
    "remember_secret",
    "scrub",
]

#: What a secret is replaced with.
MASK = "***"
#: libpq connection parameters whose value is a secret ("Parameter Key Words" in libpq's
#: documentation): ``password``, and ``sslpassword`` (the passphrase of the client key). The
#: ``sslkey``/``sslcert`` paths and ``passfile`` are file names, not secrets.
SECRET_KEYS = ("password", "sslpassword")
#: The URI schemes libpq takes ("Connection URIs").
SCHEMES = ("postgresql://", "postgres://")
#: A remembered password shorter than this is not searched for in free text (it would mask
#: ordinary words); the patterns below still mask it wherever it stands as a password.
MIN_SCRUB_LEN = 4

_KEYS = "|".join(SECRET_KEYS)
#: ``password=VALUE`` in a keyword string (VALUE quoted '...' with backslash escapes, or up to
#: white space) or in a URI query (up to ``&``, ``#`` or white space); in a sentence the
#: punctuation after it (``password=***: connection failed``) is not taken for part of it.
_KEYWORD = re.compile(rf"(?i)\b({_KEYS})(\s*=\s*)('(?:[^'\\]|\\.)*'?|[^\s&#'\"]*[^\s&#'\":,;.)\]])")
#: A URI's userinfo password: ``scheme://user:PASSWORD@`` (any scheme: a ``mysql://`` URL given by
#: mistake is refused with its password masked too).
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^\s:/@?#]*):([^\s@/?#]*)@")
#: One keyword/value pair of libpq's keyword form.
_PAIR = r"[A-Za-z_][A-Za-z0-9_]*\s*=\s*(?:'(?:[^'\\]|\\.)*'|[^\s']*)"
_KEYWORD_FORM = re.compile(rf"\s*{_PAIR}(?:\s+{_PAIR})*\s*")

_known: Set[str] = set()
_lock = threading.Lock()


def is_conninfo(text: object) -> bool:
    """Whether ``text`` is a PostgreSQL connection string: a ``postgresql://``/``postgres://`` URI
    or libpq's keyword/value form (``key=value`` pairs separated by white space)."""
    if not isinstance(text, str) or not text.strip():
        return False
    return text.startswith(SCHEMES) or _KEYWORD_FORM.fullmatch(text) is not None


def _uri_parts(url: str):
    parts = urlsplit(url)
    return parts, parse_qsl(parts.query, keep_blank_values=True)


def passwords_in(conninfo: Optional[str]) -> List[str]:
    """The secret values (:data:`SECRET_KEYS`) a connection string holds, in any form (list of
    str, empty for none or None). Parsed by psycopg when it is installed, else by urllib (URIs)
    and the keyword pattern."""
    if not conninfo:
        return []
    found: List[str] = []
    try:
        from psycopg.conninfo import conninfo_to_dict

        params = conninfo_to_dict(conninfo)
        found += [str(params[k]) for k in SECRET_KEYS if params.get(k)]
    except Exception:  # noqa: BLE001 - no psycopg, or a string libpq cannot parse: the patterns below
        pass
    if conninfo.startswith(SCHEMES):
        try:
            parts, query = _uri_parts(conninfo)
            if parts.password:
                found.append(unquote(parts.password))
            found += [v for k, v in query if k in SECRET_KEYS and v]
        except ValueError:
            pass
    for m in _USERINFO.finditer(conninfo):
        found += [m.group(2), unquote(m.group(2))]
    for m in _KEYWORD.finditer(conninfo):
        value = m.group(3)
        if value.startswith("'"):
            value = re.sub(r"\\(.)", r"\1", value.strip("'"))
        found += [value, unquote(value)]
    return sorted({v for v in found if v and v != MASK}, key=len, reverse=True)


def remember(conninfo: Optional[str]) -> None:
    """Note the passwords of ``conninfo`` so that :func:`scrub` masks them in any text this
    process shows or records later (a database's error message may quote them out of context)."""
    got = passwords_in(conninfo)
    with _lock:
        _known.update(got)


def remember_secret(secret: Optional[str]) -> None:
    """Note one secret value (a token, str) so that :func:`scrub` masks it in any text this
    process shows or records later, as :func:`remember` does for a connection string's passwords."""
    if secret:
        with _lock:
            _known.add(secret)


def redact_conninfo(conninfo: Optional[str]) -> str:
    """``conninfo`` with every secret value replaced by :data:`MASK`, in the form it was given
    (a URI stays a URI, keyword form stays keyword form), for messages and logs. Also
    :func:`remember` s them. A string that does not parse is masked by pattern (never returned
    with a password in it).

    :param conninfo: a connection string (str), or None (gives ``""``).
    """
    if not conninfo:
        return ""
    remember(conninfo)
    if conninfo.startswith(SCHEMES):
        try:
            parts = urlsplit(conninfo)
            netloc = parts.netloc
            if parts.password is not None:
                userinfo, host = netloc.rsplit("@", 1)
                netloc = f"{userinfo.split(':', 1)[0]}:{MASK}@{host}"
            # the query as given, each secret parameter's value masked (parse_qsl's reading of a key)
            pieces = [
                f"{p.split('=', 1)[0]}={MASK}" if parse_qsl(p) and parse_qsl(p)[0][0] in SECRET_KEYS else p
                for p in parts.query.split("&")
            ]
            return _mask(urlunsplit((parts.scheme, netloc, parts.path, "&".join(pieces), parts.fragment)))
        except ValueError:
            return _mask(conninfo)
    # the keyword form as given (the user's order and spelling), each value psycopg parsed as a
    # secret (remembered above) and each password=VALUE masked
    return _mask(conninfo)


def scrub(text: Optional[str]) -> Optional[str]:
    """``text`` with every password masked: those :func:`remember` was told of (at least
    :data:`MIN_SCRUB_LEN` characters), a ``password=``/``sslpassword=`` value (keyword form or
    URI query) and a URI's userinfo password. None stays None.

    :param text: any message, log line or error text (str) about to be shown or recorded.
    """
    return _mask(text) if text else text


def _mask(text: str) -> str:
    with _lock:
        known = sorted((k for k in _known if len(k) >= MIN_SCRUB_LEN), key=len, reverse=True)
    for secret in known:
        text = text.replace(secret, MASK)
    text = _USERINFO.sub(lambda m: f"{m.group(1)}:{MASK}@", text)
    return _KEYWORD.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
