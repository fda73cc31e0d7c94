"""piflash.redact: a password is masked in every connection-string form libpq takes, and in any
text quoting it (issue 39). The real database's messages: tests/production/test_ledger_secrets.py."""

from __future__ import annotations

import pytest

from piflash import redact

PW = "Tr0ub4dor&3"


@pytest.mark.parametrize(
    "conninfo, shown",
    [
        (f"postgresql://u:{PW.replace('&', '%26')}@h:5432/db", "postgresql://u:***@h:5432/db"),
        (f"postgresql://u@h/db?password={PW.replace('&', '%26')}&sslmode=require",
         "postgresql://u@h/db?password=***&sslmode=require"),
        ("postgres://h/db?sslpassword=k3yPhrase&sslkey=/etc/k.pem", "postgres://h/db?sslpassword=***&sslkey=/etc/k.pem"),
        (f"host=h password={PW} dbname=d", None),
        (f"host=h password='{PW} x' dbname=d", None),
        (f"postgresql://u:{PW}@[::1/db", "postgresql://u:***@[::1/db"),
        (f"mysql://u:{PW}@h/db", "mysql://u:***@h/db"),
    ],
)
def test_every_form_is_masked(conninfo, shown):
    got = redact.redact_conninfo(conninfo)
    assert PW not in got and "k3yPhrase" not in got and "***" in got
    if shown is not None:
        assert got == shown
    else:  # keyword form: the same parameters, the password masked
        from psycopg.conninfo import conninfo_to_dict

        assert conninfo_to_dict(got) == dict(conninfo_to_dict(conninfo), password="***")


def test_a_remembered_password_is_scrubbed_from_any_text():
    redact.remember(f"host=h dbname=d password={PW}")
    assert redact.scrub(f'could not parse "{PW}" near user') == 'could not parse "***" near user'
    assert redact.scrub(None) is None


def test_what_is_a_connection_string():
    assert redact.is_conninfo("postgresql://h/db") and redact.is_conninfo("host=h dbname='a b'")
    assert not redact.is_conninfo("mysql://h/db") and not redact.is_conninfo("just words")
    assert not redact.is_conninfo(42)


def test_a_sentence_keeps_its_punctuation():
    text = "cannot use the ledger host=h password=s3cr3t-pw: connection failed"
    assert redact.scrub(text) == "cannot use the ledger host=h password=***: connection failed"
    assert redact.scrub(redact.scrub(text)) == redact.scrub(text)
