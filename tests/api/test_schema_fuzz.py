"""The OpenAPI document tells the truth: schemathesis generates requests from it —
valid ones and ones that break it — for every operation, as an admin, as a user and with no
token, against the live app (its real SQLite world; job dispatch recorded), and checks that no
answer is a server error (``not_a_server_error``) and that every status is one the document lists
for that operation (``status_code_conformance``). Any finding fails the test.

Bounded: :data:`EXAMPLES` examples per operation and role, from valid and invalid strategies (about
1,000 requests, 40 s on 2 loaded cores).
"""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.api.conftest import World

#: Hypothesis examples per operation and role (drawn from the positive and negative strategies).
EXAMPLES = 12


@pytest.mark.slow
def test_every_answer_is_documented_and_none_is_a_server_error(client: TestClient, world: World) -> None:
    import schemathesis
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import strategies as st
    from schemathesis.checks import not_a_server_error
    from schemathesis.generation import GenerationMode
    from schemathesis.specs.openapi.checks import status_code_conformance
    from sqlalchemy import update

    from kernelrank.db.models import ApiToken
    from kernelrank.db.session import session_scope

    app = client.app
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    roles = {"none": {}, "user": world.auth("alice"), "admin": world.auth("root")}
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 29
    findings: list[str] = []
    calls: dict[str, int] = {}

    def restore_tokens() -> None:
        """Generated DELETEs revoke tokens by id: give the roles theirs back."""
        with session_scope() as s:
            s.execute(update(ApiToken).values(revoked_at=None, expires_at=None))

    for operation in operations:
        strategy = st.one_of(operation.as_strategy(GenerationMode.POSITIVE),
                             operation.as_strategy(GenerationMode.NEGATIVE))
        for role, headers in roles.items():

            @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
                      phases=[Phase.explicit, Phase.generate],
                      suppress_health_check=list(HealthCheck))
            @given(case=strategy)
            def run(case) -> None:
                restore_tokens()
                response = case.call(headers=headers)
                calls[role] = calls.get(role, 0) + 1
                try:
                    case.validate_response(response, checks=[not_a_server_error, status_code_conformance],
                                           headers=headers)
                except Exception as e:  # noqa: BLE001 - every finding is collected, then reported at once
                    findings.append(f"{operation.label} as {role}: {response.status_code}: "
                                    f"{str(e).splitlines()[0][:300]}")

            run()
    assert not findings, "\n".join(sorted(set(findings))[:50])
    assert min(calls.values()) >= len(operations) * EXAMPLES // 2, calls  # the strategies did generate
