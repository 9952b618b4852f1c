from __future__ import annotations

from importlib.resources import files

import pytest

from policies.loader import load_policy
from policies.model import Policy


@pytest.fixture(scope="session")
def crm_yaml() -> str:
    return files("policies").joinpath("examples/crm.yaml").read_text(encoding="utf-8")


@pytest.fixture(scope="session")
def crm(crm_yaml: str) -> Policy:
    return load_policy(crm_yaml, "crm.yaml")
