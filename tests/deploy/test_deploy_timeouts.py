"""nginx's timeouts agree with what the replicas behind it do (issue 12, item 3).

The replicas' values are read from their real commands in compose.yaml, parsed by the real CLI
(so a flag left out means serve's default).
"""

from __future__ import annotations

from typing import Any

import crossplane
from deploy_files import NGINX_CONF, parse_cli, shortlist_commands


def _seconds(value: str) -> float:
    units = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    for unit in sorted(units, key=len, reverse=True):
        if value.endswith(unit):
            return float(value[: -len(unit)]) * units[unit]
    return float(value)


def _directives(items: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [i for i in items if i["directive"] == name]


def test_nginx_timeouts_match_the_replicas() -> None:
    payload = crossplane.parse(str(NGINX_CONF), single=True, check_ctx=False, comments=False)
    assert payload["status"] == "ok", payload["errors"]
    top = payload["config"][0]["parsed"]
    (upstream,) = _directives(top, "upstream")
    (server,) = _directives(top, "server")

    def value(block: dict[str, Any], name: str) -> float:
        (d,) = _directives(block["block"], name)
        return _seconds(d["args"][0])

    serves = [parse_cli(c.argv[1:]) for c in shortlist_commands() if c.subcommand == "serve"]
    assert serves
    for args in serves:
        # nginx must drop an idle upstream connection before the replica does, or it reuses a
        # connection the replica is closing and the request fails with 502
        assert value(upstream, "keepalive_timeout") < args.timeout_keep_alive
        # a client's slow header is cut off by nginx no later than by the replica itself
        assert value(server, "client_header_timeout") <= args.timeout_header
        assert value(server, "client_body_timeout") <= args.timeout
        (location,) = _directives(server["block"], "location")
        assert value(location, "proxy_read_timeout") > args.timeout  # the replica answers 504 itself
