"""Route paths, shared by the server and the one client."""

HEALTH = "/v1/health"
WHOAMI = "/v1/whoami"
PEOPLE = "/v1/people"
PERSON = "/v1/people/{name}"
PERSON_TOKEN = "/v1/people/{name}/token"
RUNNERS = "/v1/runners"
KEY_NONCES = "/v1/key-nonces"  # a nonce to sign: registration, enrolment and joining prove the key
RUNNER = "/v1/runners/{ref}"
RUNNER_BY_FINGERPRINT = "/v1/runners-by-fingerprint"  # ?fingerprint=SHA256:… (has '/', '+')
RUNNER_CHECK_IN = "/v1/runner/check-in"
RUNNER_CLAIM = "/v1/runner/claim"
RUNNER_GOODBYE = "/v1/runner/goodbye"
RUNNER_CHALLENGE = "/v1/runner/challenge"
RUNNER_CREDENTIAL = "/v1/runner/credential"
LEASE_RENEW = "/v1/runner/flights/{flight_id}/renew"
LEASE_FACTS = "/v1/runner/flights/{flight_id}/facts"
LEASE_HAND_BACK = "/v1/runner/flights/{flight_id}/hand-back"
FLIGHTS = "/v1/flights"
FLIGHT = "/v1/flights/{flight_id}"
FLIGHT_FACTS = "/v1/flights/{flight_id}/facts"
FLIGHT_CANCEL = "/v1/flights/{flight_id}/cancel"
FLIGHT_GRAPH = "/v1/flights/{flight_id}/graph"  # the graph it belongs to (docs/work-graphs.md)
GRAPHS = "/v1/graphs"  # many flights opened at once, in one transaction (gg fly --file)
FLIGHT_RERUN = "/v1/flights/{flight_id}/rerun"  # gg rerun: a new flight from its spec
EVENTS = "/v1/events"
ESTIMATE_ACCURACY = "/v1/estimates/accuracy"  # start estimates against the starts (docs/waiting.md)
GATES = "/v1/gates"
GATE = "/v1/gates/{gate_id}"
GATE_CLEAR = "/v1/gates/{gate_id}/clear"
# Enrolment: fleet profiles, enrolment tokens, enrolled runners, credential references.
PROFILES = "/v1/profiles"
PROFILE = "/v1/profiles/{name}"
ENROL_TOKENS = "/v1/enrolment-tokens"
ENROL_TOKEN_REVOKE = "/v1/enrolment-tokens/{fingerprint}/revoke"
ENROL = "/v1/enrol"
RUNNER_CREDENTIALS = "/v1/runner/credentials"
CREDENTIALS = "/v1/credentials"
RUNNER_CORDON = "/v1/runners/{ref}/cordon"
RUNNER_DRAIN = "/v1/runners/{ref}/drain"
RUNNER_RESUME = "/v1/runners/{ref}/resume"
RUNNER_RETIRE = "/v1/runners/{ref}/retire"
RUNNER_POLICY = "/v1/runners/{ref}/policy"
RUNNERS_DRAIN = "/v1/runners/drain"  # every runner advertising the given labels

# -- pools and strategies (docs/pools.md) ----------------------------------------------------
STRATEGIES = "/v1/strategies"
STRATEGY = "/v1/strategies/{name}"
STRATEGY_DIGEST = "/v1/strategies/{name}/digest"
POOLS = "/v1/pools"
POOL = "/v1/pools/{pool}"
POOL_ALLOW = "/v1/pools/{pool}/allow"
POOL_PLAN = "/v1/pools/{pool}/plan"
POOL_ACTIONS = "/v1/pools/{pool}/actions"
POOL_ATTEST = "/v1/pools/{pool}/attest"
MEMBER_JOIN = "/v1/members/join"

# -- hooks (docs/operations.md) ----------------------------------------------------------
HOOKS = "/v1/hooks"
HOOK = "/v1/hooks/{hook_id}"

# -- secrets (docs/jobs.md) ----------------------------------------------------------------
SECRETS = "/v1/secrets"
SECRET = "/v1/secrets/{name}"

# -- groups and the fleet-wide stop (docs/groups.md) -------------------------------------
GROUPS = "/v1/groups"
GROUP = "/v1/groups/{name}"
GROUP_DRAIN = "/v1/groups/{name}/drain"
GROUP_RESUME = "/v1/groups/{name}/resume"
GROUP_DEMAND = "/v1/groups/{name}/demand"
ATTRIBUTES = "/v1/attributes"
ATTRIBUTE = "/v1/attributes/{key}"
RUNNER_GROUP = "/v1/runners/{ref}/group"
FLEET = "/v1/fleet"
FLEET_QUIESCE = "/v1/fleet/quiesce"
FLEET_RESUME = "/v1/fleet/resume"
RUNNER_ATTACH = "/v1/runners/attach"  # gg runner attach (admin; docs/runner-modes.md)
