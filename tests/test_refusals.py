"""The client turns each error code back into a class of its own (gg/refusals.py), so callers
catch ``RunnerRetired`` instead of comparing strings, and ``except ApiError`` still holds."""

from __future__ import annotations

import pytest

from gg import refusals
from gg.error_codes import ErrorCode
from gg.refusals import ApiError, FlightEnded, RunnerRetired, ServerFault, refusal

# No refusal of its own: "error" and "http_error" name none, "unreachable" is no answer at
# all (gg.client.Unreachable).
CLASSLESS = {ErrorCode.ERROR, ErrorCode.HTTP_ERROR, ErrorCode.UNREACHABLE}
SERVER_FAULTS = {ErrorCode.INTERNAL, ErrorCode.UNAVAILABLE, ErrorCode.INSUFFICIENT_STORAGE,
                 ErrorCode.DATABASE_UNAVAILABLE}


@pytest.mark.parametrize("code", [c for c in ErrorCode if c not in CLASSLESS])
def test_every_code_the_server_says_is_raised_as_a_class_of_its_own(code):
    status = 503 if code in SERVER_FAULTS else 409
    raised = refusal(status, code.value, "refused")
    assert type(raised) is not ApiError and type(raised) is not ServerFault
    assert isinstance(raised, ApiError) and raised.code == code
    assert isinstance(raised, ServerFault) == (code in SERVER_FAULTS)
    assert (raised.status, raised.message) == (status, "refused")


def test_each_class_stands_for_one_code():
    kinds = [k for k in vars(refusals).values()
             if isinstance(k, type) and issubclass(k, ApiError) and k not in (ApiError, ServerFault)]
    assert sorted(k.code for k in kinds) == sorted(c for c in ErrorCode if c not in CLASSLESS)


@pytest.mark.parametrize("status, kind", [(409, ApiError), (500, ServerFault), (503, ServerFault)])
def test_a_code_this_client_does_not_know_is_a_plain_refusal(status, kind):
    for code in ("a_newer_servers_code", ErrorCode.ERROR.value, ErrorCode.HTTP_ERROR.value):
        raised = refusal(status, code, "refused")
        assert type(raised) is kind and raised.code == code


def test_a_class_is_given_only_where_the_status_agrees():
    assert type(refusal(502, ErrorCode.RUNNER_RETIRED, "a proxy's")) is ServerFault
    assert type(refusal(400, ErrorCode.UNAVAILABLE, "odd")) is ApiError


def test_except_api_error_still_catches_each_class():
    for raised in (refusal(403, "runner_retired", "retired"), refusal(409, "flight_ended", "x")):
        with pytest.raises(ApiError):
            raise raised
    assert isinstance(refusal(403, "runner_retired", "r"), RunnerRetired)
    assert isinstance(refusal(409, "flight_ended", "e"), FlightEnded)
