"""Schemathesis against ``/openapi.json`` of a real ``gg server``: no 5xx, ever, and every
answer is what the schema says.

Every operation of the published schema gets valid (positive) and invalid (negative)
requests generated from it, once with a person's token and once with a runner's
credential, at a bounded example count so CI stays fast. Any answer >= 500, and any answer
whose body does not conform to the schema published for its status, fails the test with the
request that caused it (as a curl command).
"""

from __future__ import annotations

import time

import httpx
import psutil
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error, response_schema_conformance
from schemathesis.core.failures import FailureGroup

from gg.launch import LocalServer, free_port

from support import http_proof

EXAMPLES = 3  # per operation, per mode, per caller: a few hundred requests in all


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz")
    env = {"GG_CLAIM_WAIT": "0.2", "GG_CHECK_IN_INTERVAL": "0.5"}
    srv = LocalServer(root / "data", free_port(), env=env, log=root / "server.log").start()
    owner = srv.owner_token()
    reg = httpx.post(srv.url + "/v1/runners", headers={"authorization": f"Bearer {owner}"},
                     json={"name": "fuzzed", **http_proof(httpx, "register", base=srv.url)}).json()
    httpx.post(srv.url + "/v1/flights", headers={"authorization": f"Bearer {owner}"},
               json={"command": ["true"]}).raise_for_status()
    srv.tokens = {"person": owner, "runner": reg["credential"]}
    try:
        yield srv
    finally:
        srv.stop()


def _shorten_waits(case) -> None:
    """Long-poll parameters are real waits; keep them short so the run stays bounded."""
    for name in ("wait",):
        if isinstance(case.query, dict) and name in case.query:
            case.query[name] = 0
    if isinstance(case.body, dict) and isinstance(case.body.get("wait"), (int, float)):
        case.body["wait"] = 0


def _negatable(operation) -> bool:
    """Whether an invalid request can be made for ``operation``: it takes a body, a query,
    a header or a cookie, or a path parameter with a constraint (a pattern, a length). An
    operation whose only input is a free string in its path has nothing to get wrong, and
    asking Hypothesis for one anyway spends seconds of filtering before it gives up."""
    if len(operation.body) or len(operation.query) or len(operation.headers) \
            or len(operation.cookies):
        return True
    return any(set(p.definition.get("schema") or {}) - {"type", "title"}
               for p in operation.path_parameters)


SHARES = 2  # each (caller, mode) pair's operations in this many tests: the suite's workers
# take them side by side, where one test walking every operation held a worker ~6 minutes


@pytest.mark.timeout(400)
@pytest.mark.parametrize("share", range(SHARES))
@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE],
                         ids=["valid", "invalid"])
@pytest.mark.parametrize("who", ["person", "runner"])
def test_no_operation_answers_5xx_to_generated_requests(server, who, mode, share):
    schema = schemathesis.openapi.from_url(server.url + "/openapi.json")
    every = [result.ok() for result in schema.get_all_operations()]
    assert len(every) >= 15
    operations = every[share::SHARES]
    token = server.tokens[who]
    failures: list[str] = []
    seen = {"requests": 0}
    started = time.monotonic()
    before = psutil.Process(server.proc.pid).memory_info().rss

    if mode is GenerationMode.NEGATIVE:
        operations = [op for op in operations if _negatable(op)]
    for operation in operations:
        strategy = operation.as_strategy(generation_mode=mode)

        @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
                  suppress_health_check=list(HealthCheck), phases=[Phase.generate])
        @given(case=strategy)
        def probe(case):
            _shorten_waits(case)
            response = case.call(base_url=server.url, timeout=30,
                                 headers={"authorization": f"Bearer {token}"})
            seen["requests"] += 1
            try:
                case.validate_response(
                    response, checks=[not_a_server_error, response_schema_conformance])
            except (AssertionError, FailureGroup) as exc:
                failures.append(f"{who}: {response.status_code} {response.text[:200]} "
                                f"({str(exc)[:300]}) <- {case.as_curl_command()}")
            if response.status_code < 500 and response.status_code != 204:
                kind = " ".join(response.headers.get("content-type", []))
                assert kind.startswith("application/json"), case.as_curl_command()

        try:
            probe()
        except Unsatisfiable:  # nothing to negate (an operation without inputs)
            assert mode is GenerationMode.NEGATIVE, operation.label

    elapsed = time.monotonic() - started
    after = psutil.Process(server.proc.pid).memory_info().rss
    assert not failures, "\n".join(failures[:20])
    assert server.proc.poll() is None, "the server died"
    # every operation is asked validly; invalidly, where it has an input to get wrong
    assert seen["requests"] >= (len(operations) if mode is GenerationMode.POSITIVE else 1)
    print(f"the fuzz run took {elapsed:.0f}s for {seen['requests']} requests")  # not a bound
    assert after - before < 64 * 2**20, f"RSS grew {(after - before) / 2**20:.0f} MiB"
