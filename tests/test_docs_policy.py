"""Each policy a page shows in a `yaml` block is the file it names just before the block,
as data, and loads as a policy."""

from __future__ import annotations

import re

import pytest
import yaml

from policies.loader import load_policy
from tests.docs_pages import Block, blocks, page_text
from tests.support import REPO

NAMED_FILE = re.compile(r"`([\w/.-]+\.yaml)`")
YAML = blocks("yaml")


def named_file(block: Block) -> str:
    before = page_text(block.page)[: block.offset].rstrip().rsplit("\n\n", 1)[-1]
    names = NAMED_FILE.findall(before)
    assert names, f"{block.name}: the paragraph before it names no .yaml file"
    return str(names[-1])


def test_the_docs_show_a_policy() -> None:
    assert YAML


@pytest.mark.parametrize("block", YAML, ids=[b.name for b in YAML])
def test_each_policy_shown_is_its_file(block: Block) -> None:
    path = REPO / named_file(block)
    assert yaml.safe_load(block.text) == yaml.safe_load(path.read_text(encoding="utf-8"))
    load_policy(block.text, block.name)
