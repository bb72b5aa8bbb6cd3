"""Names for the landmarks and the dialog that Material's templates leave unnamed.

A screen reader lists a page's navigation landmarks by name, so two unnamed ones
cannot be told apart (axe's landmark-unique), and a dialog needs a name to be
announced (aria-dialog-name). Material writes the search dialog, a note's sidebar
and its metadata, its tags and the index's pagination without one; the index's
"Continue reading" link under each post sits in a navigation landmark of its own,
ten alike on a page, and becomes a plain block. The code blocks' copy buttons are
the one unnamed navigation that Material adds by script; keyboard.js unmarks those.
``tests/site/test_accessibility_browser.py`` runs axe over every page in both
schemes, so a Material release that changes this markup fails there.
"""

from __future__ import annotations

import re

NAMED = (
    (
        '<div class="md-search" data-md-component="search" role="dialog">',
        '<div class="md-search" data-md-component="search" role="dialog"'
        ' aria-label="Search">',
    ),
    (
        '<nav class="md-nav md-nav--primary">',
        '<nav class="md-nav md-nav--primary" aria-label="About this note">',
    ),
    ('<nav class="md-nav">', '<nav class="md-nav" aria-label="Metadata">'),
    ('<nav class="md-tags" ', '<nav class="md-tags" aria-label="Tags" '),
    ('<nav class="md-pagination">', '<nav class="md-pagination" aria-label="Pages">'),
)
ACTION = re.compile(r'<nav class="md-post__action">(.*?)</nav>', re.S)


def name_landmarks(html: str) -> str:
    for before, after in NAMED:
        html = html.replace(before, after)
    return ACTION.sub(r'<div class="md-post__action">\1</div>', html)


def on_post_page(output: str, page, config) -> str:
    return name_landmarks(output)
