"""The settings `edgeloom serve --workers N` hands each worker process come back whole."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from gql.feed.hub import FeedOptions
from gql.server.settings import Settings
from gql.server.workers import SETTINGS_VARIABLE, settings_environment, settings_from_environment
from store.reads.replicas import ReplicaOptions


def test_a_worker_gets_the_settings_it_was_started_with(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    given = Settings(
        database_url="postgresql://postgres@127.0.0.1:5432/test",
        read_pool_size=8,
        checkpoint_key=tmp_path / "key.pem",
        feed=FeedOptions(queue_batches=7),
        replicas=ReplicaOptions(
            urls=("postgresql://a@127.0.0.1:5433/m", "postgresql://b@127.0.0.1:5434/m"),
            max_lag_bytes=1024,
        ),
    )
    environment = settings_environment(given, workers=2)
    monkeypatch.setenv(SETTINGS_VARIABLE, environment[SETTINGS_VARIABLE])
    # Each worker's share of the read pool, and no migrations: the parent ran them.
    expected = dataclasses.replace(given, run_migrations=False, read_pool_size=6)
    assert settings_from_environment() == expected
