from __future__ import annotations

import pytest

from policies.loader import load_policy
from policies.model import Policy


@pytest.fixture(scope="session")
def crm(crm_yaml: str) -> Policy:
    return load_policy(crm_yaml, "crm.yaml")
