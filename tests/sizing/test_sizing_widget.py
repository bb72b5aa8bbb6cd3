"""The sizing calculator's page data: the presets, byte tables and defaults exactly as
Python holds them, in a figure the page reads back (a "</" inside cannot end the
script early), and an option table that says what the CLI's parser does. The page
itself is held to the CLI in tests/site/test_sizing_browser.py."""

from __future__ import annotations

import pytest
from conftest import refused

from snippets.core import cli, parts
from snippets.render import render
from snippets.render.fragments import read_back
from snippets.sizing import estimate, memory, presets, size_cli, sizing_widget


def test_main_embeds_the_python_presets() -> None:
    part = sizing_widget.main()["parts"]["widget"]
    text = render(part)
    data = read_back(text, "sizing", "data")
    assert data["models"] == presets.MODELS and data["gpus"] == presets.GPUS
    assert data["defaults"] == estimate.DEFAULTS
    assert data["precisions"] == memory.PRECISIONS
    assert data["optimizer_state"] == memory.OPTIMIZER_STATE
    assert data["activation_bytes"] == memory.ACTIVATION_BYTES
    assert data["limits"] == {"max_gpus": 2**20, "mfu_shown": 0.0005}
    assert data["shape"] == list(size_cli.SHAPE)
    assert text.startswith('<figure class="cp-sizing"') and "\n\n" not in text


def test_a_closing_tag_in_the_data_survives() -> None:
    data = {"help": "ends </script> here", "n": [1, 2.5, None, True]}
    text = render(parts.sizing(data))
    assert text.count("</script>") == 1
    assert read_back(text, "sizing", "data") == data
    with pytest.raises(ValueError):
        read_back("<p>no widget</p>", "sizing", "data")


def test_the_option_table_is_what_the_parser_does(capfd) -> None:
    table = sizing_widget.options()
    parser = size_cli.parser()
    assert {o["dest"] for o in table} | set(sizing_widget.LEFT_OUT) == {
        a.dest for a in parser._actions
    }
    for o in table:
        if o["switch"]:
            assert vars(parser.parse_args([o["flag"]]))[o["dest"]] is True, o
            assert vars(parser.parse_args([]))[o["dest"]] is False, o
            continue
        text = str(o["choices"][-1]) if o["choices"] else "3"
        got = vars(parser.parse_args([o["flag"], text]))[o["dest"]]
        want = getattr(cli, o["type"])(text) if o["type"] else text
        assert got == want and type(got) is type(want), o
        assert vars(parser.parse_args([]))[o["dest"]] == o["default"], o
        if o["type"]:  # the page refuses what the parser refuses
            refused([o["flag"], "-1"], capfd, entry=parser.parse_args)
