"""bench/adapters.py: --stream only where the API can be asked to stream (issue 22: the plan's own
check printed `--stream` with the default adapter, which ignored it and timed the whole response)."""

from __future__ import annotations

import pytest

from ttsperf.bench.adapters import ADAPTERS, STREAMING, AdapterOptions, make_adapter
from ttsperf.errors import UserError


@pytest.mark.parametrize("name", sorted(set(ADAPTERS) - set(STREAMING)))
def test_stream_is_refused_by_an_adapter_whose_api_cannot_stream(name):
    with pytest.raises(
        UserError, match=rf"--stream: the {name} adapter's API cannot be asked to stream.*--adapter openai"
    ):
        make_adapter(name, AdapterOptions(stream=True, template_body='{"input": "{text}"}'))


def test_the_openai_adapter_asks_for_a_stream():
    from ttsperf.bench.texts import Item

    req = make_adapter("openai", AdapterOptions(stream=True)).build("http://h:1", Item("hi"))
    assert req.url == "http://h:1/v1/audio/speech" and req.json["stream"] is True
