"""The settings of `edgeloom serve --workers N`, handed to each worker process."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

from gql.app import GatewayApp, create_app
from gql.feed_hub import FeedOptions
from gql.settings import Settings

SETTINGS_VARIABLE = "EDGELOOM_SETTINGS"
APP_FACTORY = "gql.workers:app_from_environment"


def settings_environment(settings: Settings, workers: int) -> dict[str, str]:
    """The environment a worker process reads its settings from (`app_from_environment`);
    migrations and the policy were applied by the process that starts the workers.

    The workers share the clients, so they share the read pool's size too (each
    keeps a few more than its share, since clients do not spread evenly).
    """
    share = max(4, -(-settings.read_pool_size // workers) + 2)
    prepared = dataclasses.replace(settings, run_migrations=False, read_pool_size=share)
    return {SETTINGS_VARIABLE: json.dumps(dataclasses.asdict(prepared), default=str)}


def app_from_environment() -> GatewayApp:
    """The app of one worker of `edgeloom serve --workers N`."""
    fields = json.loads(os.environ[SETTINGS_VARIABLE])
    fields["feed"] = FeedOptions(**fields["feed"])
    if fields["checkpoint_key"] is not None:
        fields["checkpoint_key"] = Path(fields["checkpoint_key"])
    return create_app(Settings(**fields))
