"""The tag rule: which `#word`s of a content are tags."""

from __future__ import annotations

from store.kinds.record.tags import MAX_TAG_CHARS, normal_tag, tags_of


def test_words_after_a_hash_are_tags_in_lower_case_once_each() -> None:
    text = "Renewal #Acme and #acme again, #q3-plan, #area/sub. End #done"
    assert tags_of(text) == ("acme", "area/sub", "done", "q3-plan")


def test_headings_fragments_entities_and_numbers_are_not_tags() -> None:
    text = "\n".join(
        [
            "# Heading",
            "## Second heading",
            "see page#part and https://x.org/a#frag",
            "&#38; and ##double and #123 and #_under",
            "a#b",
        ]
    )
    assert tags_of(text) == ()


def test_code_is_not_searched_for_tags() -> None:
    text = "\n".join(
        ["before #kept", "```c", "#include <stdio.h>", "```", "inline `#nope` then #also"]
    )
    assert tags_of(text) == ("also", "kept")


def test_letters_of_any_script_and_trailing_separators() -> None:
    assert tags_of("#café #日本 #end- #x/") == ("café", "end", "x", "日本")


def test_an_overlong_word_is_no_tag() -> None:
    assert tags_of("#" + "a" * (MAX_TAG_CHARS + 1)) == ()
    assert tags_of("#" + "a" * MAX_TAG_CHARS) == ("a" * MAX_TAG_CHARS,)


def test_a_tag_asked_for_is_normalised_like_those_found() -> None:
    assert normal_tag(" #Acme ") == "acme"
    assert normal_tag("acme") == "acme"


def test_a_tag_is_no_heading_named_in_a_link_nor_code_inside_a_callout() -> None:
    text = (
        "See [[#Heading]], [[Note#Sub|#alias]], ![[img.png#x]] and [a](#anchor). #kept\n"
        "> ```\n> #in-callout-code\n> ```\n"
    )
    assert tags_of(text) == ("kept",)


def test_a_frontmatter_lists_tags_and_its_other_lines_hold_none() -> None:
    text = "---\ntags: [Alpha, '#beta/x']\ntitle: x #no\n---\n# H #text\n"
    assert tags_of(text) == ("alpha", "beta/x", "text")
    assert tags_of("---\ntag: one, two three\n---\n") == ("one", "three", "two")
    assert tags_of("---\ntags: [1, {a: b}]\n---\n") == ()
