"""LSNs as the gateway reads them from PostgreSQL and from clients, and the read URLs."""

from __future__ import annotations

from store.reads.replicas import Freshness, format_lsn, parse_lsn, read_urls


def test_an_lsn_reads_and_writes_as_postgresql_writes_it() -> None:
    assert parse_lsn("0/309C680") == 0x309C680
    assert parse_lsn("1A/0") == 0x1A << 32
    assert parse_lsn('"16/B374D848"') == (0x16 << 32) + 0xB374D848  # a quoted cookie
    for lsn in (0, 0x309C680, (0xFFFFFFFF << 32) + 0xFFFFFFFF):
        assert parse_lsn(format_lsn(lsn)) == lsn


def test_what_a_client_sends_that_is_no_lsn_is_ignored() -> None:
    for sent in (None, "", "0", "x/1", "1/x", "/", "0/0/0", "1" * 20 + "/0"):
        assert parse_lsn(sent) is None, sent


def test_the_read_urls_are_comma_separated() -> None:
    assert read_urls(None) == ()
    assert read_urls(" postgresql://a/db , ,postgresql://b/db") == (
        "postgresql://a/db",
        "postgresql://b/db",
    )


def test_a_request_keeps_its_newest_write() -> None:
    freshness = Freshness()
    for lsn in (5, None, 3, 9):
        freshness.wrote(lsn)
    assert freshness.written == 9
