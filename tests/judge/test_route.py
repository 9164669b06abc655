"""Judge routes: every spelling, and the precedence of resolve_routes (plugin > command line > campaign file >
auto; per table an architecture's own entry before `*`)."""

from __future__ import annotations

import pytest

from ptxcore.judge import JudgeRoute, RouteError, RouteKind, resolve_routes
from ptxcore.judge.route import (
    PLUGIN_ENV,
    WORKER_JUDGE_ENV,
    parse_cli_routes,
    parse_file_routes,
    worker_route,
)

AUTO = JudgeRoute(RouteKind.AUTO)
NONE = JudgeRoute(RouteKind.NONE)
LOCAL = JudgeRoute(RouteKind.LOCAL)
PREFECT = JudgeRoute(RouteKind.PREFECT)
URL = JudgeRoute(RouteKind.SERVICE, "http://gpu-host:8765")
RECORDED = JudgeRoute(RouteKind.RECORDED, "/data/h200")
PLUGIN = JudgeRoute(RouteKind.PLUGIN, "tests.flows.fakes:fake_judge")


@pytest.mark.parametrize("text,route", [
    ("auto", AUTO), (" LOCAL ", LOCAL), ("none", NONE), ("prefect", PREFECT),
    ("http://gpu-host:8765/", URL), ("https://gpu-host", JudgeRoute(RouteKind.SERVICE, "https://gpu-host")),
    ("recorded:/data/h200", RECORDED), ("recorded:/a=b", JudgeRoute(RouteKind.RECORDED, "/a=b")),
    ("plugin:tests.flows.fakes:fake_judge", PLUGIN),
])
def test_each_spelling_parses_and_prints_back(text, route):
    assert JudgeRoute.parse(text) == route
    assert JudgeRoute.parse(str(route)) == route


@pytest.mark.parametrize("text,needle", [
    ("http://", "the URL has no host"),
    ("", "expected auto, local"),
    ("recorded:", "expected auto, local"),
    ("gpu-host:8000", "expected auto, local"),
    ("plugin:nocolon", "expected auto, local"),
    ("tests.flows.fakes:fake_judge", "expected auto, local"),  # a bare module:factory is no route spelling
    ("prefekt", "'prefekt'"),
])
def test_a_bad_route_is_a_route_error_naming_it(text, needle):
    with pytest.raises(RouteError, match=needle) as info:
        JudgeRoute.parse(text)
    assert repr(text) in str(info.value)


@pytest.mark.parametrize("values,routes", [
    (None, {}),
    (["prefect"], {"*": PREFECT}),
    (["hopper=http://gpu-host:8765"], {"hopper": URL}),
    (["h200=local", "none"], {"hopper": LOCAL, "*": NONE}),  # an alias names its architecture
    (["b200=recorded:/data/h200"], {"blackwell": RECORDED}),
    (["http://gpu-host:8765"], {"*": URL}),
    (["http://h:1/x=y"], {"*": JudgeRoute(RouteKind.SERVICE, "http://h:1/x=y")}),  # '=' inside a URL
    (["recorded:/a=b"], {"*": JudgeRoute(RouteKind.RECORDED, "/a=b")}),  # '=' inside a path
])
def test_command_line_routes_arch_equals_route_or_every_architecture(values, routes):
    assert parse_cli_routes(values) == routes


def test_campaign_file_routes_use_architecture_keys_and_star():
    assert parse_file_routes({"h100": "none", "*": "local"}) == {"hopper": NONE, "*": LOCAL}
    with pytest.raises(RouteError, match="'gpu-host:1'"):
        parse_file_routes({"hopper": "gpu-host:1"})


BOTH = ["hopper", "blackwell"]


@pytest.mark.parametrize("cli,campaign,plugin,env,want", [
    # nothing names a route: auto
    ({}, {}, None, {}, {"hopper": AUTO, "blackwell": AUTO}),
    # the campaign file alone
    ({}, {"hopper": URL}, None, {}, {"hopper": URL, "blackwell": AUTO}),
    ({}, {"*": NONE}, None, {}, {"hopper": NONE, "blackwell": NONE}),
    ({}, {"*": NONE, "hopper": URL}, None, {}, {"hopper": URL, "blackwell": NONE}),  # own entry before `*`
    # the command line beats the campaign file, its `*` included
    ({"*": PREFECT}, {"hopper": URL}, None, {}, {"hopper": PREFECT, "blackwell": PREFECT}),
    ({"hopper": LOCAL}, {"*": NONE}, None, {}, {"hopper": LOCAL, "blackwell": NONE}),
    ({"blackwell": RECORDED}, {"blackwell": URL}, None, {}, {"hopper": AUTO, "blackwell": RECORDED}),
    ({"*": NONE, "hopper": URL}, {"hopper": LOCAL}, None, {}, {"hopper": URL, "blackwell": NONE}),
    # an explicit plugin beats everything, from the argument or the environment
    ({"*": URL}, {"*": NONE}, "tests.flows.fakes:fake_judge", {}, {"hopper": PLUGIN, "blackwell": PLUGIN}),
    ({"hopper": URL}, {}, None, {PLUGIN_ENV: "tests.flows.fakes:fake_judge"}, {"hopper": PLUGIN, "blackwell": PLUGIN}),
    # an empty environment value is no plugin
    ({}, {"hopper": URL}, None, {PLUGIN_ENV: ""}, {"hopper": URL, "blackwell": AUTO}),
])
def test_resolve_routes_precedence(cli, campaign, plugin, env, want):
    assert resolve_routes(BOTH, cli=cli, campaign=campaign, plugin=plugin, env=env) == want


def test_a_malformed_plugin_is_a_route_error():
    with pytest.raises(RouteError, match="'nocolon' must look like module:factory"):
        resolve_routes(["hopper"], plugin="nocolon", env={})


@pytest.mark.parametrize("spec,want", [
    ("", AUTO), ("  ", AUTO), ("http://gpu-host:8765", URL), ("local", LOCAL),
    ("plugin:tests.flows.fakes:fake_judge", PLUGIN), ("recorded:/data/h200", RECORDED),
])
def test_worker_route_spellings(spec, want):
    assert worker_route({WORKER_JUDGE_ENV: spec}) == want
    assert worker_route({}) == AUTO


@pytest.mark.parametrize("spec,needle", [
    ("prefect", "a worker cannot hand its judgements to other workers"),
    ("tests.flows.fakes:fake_judge", "expected auto, local"),  # a plugin is spelled plugin:module:factory
    ("gpu:8765", "'gpu:8765'"),
])
def test_worker_route_refuses(spec, needle):
    with pytest.raises(RouteError, match=needle):
        worker_route({WORKER_JUDGE_ENV: spec})
