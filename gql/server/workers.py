"""The settings of `edgeloom serve --workers N`, handed to each worker process."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

from gql.server.app import GatewayApp, create_app
from gql.server.settings import Settings

SETTINGS_VARIABLE = "EDGELOOM_SETTINGS"
APP_FACTORY = "gql.server.workers:app_from_environment"


def settings_environment(settings: Settings, workers: int) -> dict[str, str]:
    """The environment a worker process reads its settings from (`app_from_environment`);
    migrations and the policy were applied by the process that starts the workers.

    The workers share the clients, so they share the read pool's size too (each
    keeps a few more than its share, since clients do not spread evenly).
    """
    share = max(4, -(-settings.read_pool_size // workers) + 2)
    prepared = dataclasses.replace(settings, run_migrations=False, read_pool_size=share)
    return {SETTINGS_VARIABLE: json.dumps(dataclasses.asdict(prepared), default=str)}


def settings_from_environment() -> Settings:
    """The settings `settings_environment` handed to this worker process."""
    fields = _revived(Settings, json.loads(os.environ[SETTINGS_VARIABLE]))
    if fields["checkpoint_key"] is not None:
        fields["checkpoint_key"] = Path(fields["checkpoint_key"])
    return Settings(**fields)


def app_from_environment() -> GatewayApp:
    """The app of one worker of `edgeloom serve --workers N`."""
    return create_app(settings_from_environment())


def _revived(cls: type[Any], values: dict[str, Any]) -> dict[str, Any]:
    """A settings dataclass's fields from their JSON form: the options nested in it
    (a dataclass default) as that dataclass again, and tuples as tuples."""
    fields = dict(values)
    for f in dataclasses.fields(cls):
        value, default = fields.get(f.name), f.default
        if value is None:
            continue
        if dataclasses.is_dataclass(default) and not isinstance(default, type):
            fields[f.name] = type(default)(**_revived(type(default), value))
        elif isinstance(default, tuple):
            fields[f.name] = tuple(value)
    return fields
