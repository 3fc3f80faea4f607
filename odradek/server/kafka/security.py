"""KafkaSecurityApis: SaslHandshake and SaslAuthenticate (a connection's authentication)
and DescribeUserScramCredentials / AlterUserScramCredentials (the users' SCRAM credentials),
on Kafka's protocol."""

from __future__ import annotations

import asyncio
from collections import Counter
from concurrent.futures import Executor
from typing import Any

from odradek.errors import (
    DuplicateResourceError,
    IllegalSaslStateError,
    KafkaError,
    ResourceNotFoundError,
    SaslAuthenticationFailedError,
    UnacceptableCredentialError,
    UnsupportedSaslMechanismError,
)
from odradek.protocol.kafka import api_versions as apis
from odradek.security.credential_store import CredentialStore
from odradek.security.scram_credential import MAX_ITERATIONS, MIN_ITERATIONS, ScramCredential
from odradek.server.authorization.authorizer import Authorizer
from odradek.server.kafka.request import KafkaHandler, KafkaRequest
from odradek.server.request_context import RequestContext

SCRAM_MECHANISM_CODES = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
"""Kafka's ``ScramMechanism`` numbers."""
SCRAM_CODES_BY_NAME = {name: code for code, name in SCRAM_MECHANISM_CODES.items()}


class KafkaSecurityApis:
    """The SASL and SCRAM-credential APIs of Kafka's protocol."""

    def __init__(
        self, credentials: CredentialStore, authorizer: Authorizer, executor: Executor
    ) -> None:
        self._credentials = credentials
        self._authorizer = authorizer
        self._executor = executor

    def handlers(self) -> dict[int, KafkaHandler]:
        return {
            apis.SASL_HANDSHAKE: self._sasl_handshake,
            apis.SASL_AUTHENTICATE: self._sasl_authenticate,
            apis.DESCRIBE_USER_SCRAM_CREDENTIALS: self._describe_user_scram_credentials,
            apis.ALTER_USER_SCRAM_CREDENTIALS: self._alter_user_scram_credentials,
        }

    # --- SASL --------------------------------------------------------------------------------

    async def _sasl_handshake(self, request: KafkaRequest, context: RequestContext) -> dict:
        authenticator = _authenticator(context)
        if authenticator is None:
            return {"error_code": IllegalSaslStateError.code, "mechanisms": []}
        try:
            authenticator.handshake(request.body["mechanism"], request.api_version)
        except KafkaError as error:
            return {"error_code": error.code, "mechanisms": list(authenticator.mechanisms)}
        return {"error_code": 0, "mechanisms": list(authenticator.mechanisms)}

    async def _sasl_authenticate(self, request: KafkaRequest, context: RequestContext) -> dict:
        authenticator = _authenticator(context)
        answer: dict[str, Any] = {"auth_bytes": b"", "session_lifetime": 0}
        if authenticator is None:
            message = "this listener does not use SASL"
            return {**answer, "error_code": IllegalSaslStateError.code, "error_message": message}
        try:
            token = await authenticator.authenticate(bytes(request.body["auth_bytes"]))
        except SaslAuthenticationFailedError as error:
            await asyncio.sleep(authenticator.failure_delay_s)
            return {**answer, "error_code": error.code, "error_message": error.message}
        except KafkaError as error:
            return {**answer, "error_code": error.code, "error_message": error.message}
        return {**answer, "error_code": 0, "error_message": None, "auth_bytes": token}

    # --- SCRAM credentials -------------------------------------------------------------------

    async def _describe_user_scram_credentials(
        self, request: KafkaRequest, context: RequestContext
    ) -> dict:
        denied = self._authorizer.cluster_denial(context, "Describe")
        if denied is not None:
            return _top_error(denied, "results")
        users = await self._in_thread(self._credentials.users)
        asked = request.body.get("users")
        names = sorted(users) if not asked else [user["name"] for user in asked]
        counts = Counter(names)
        results = []
        for name in dict.fromkeys(names):
            error: KafkaError | None = None
            if counts[name] > 1:
                error = DuplicateResourceError(f"user {name} is asked for more than once")
            elif name not in users:
                error = ResourceNotFoundError(
                    f"attempt to describe a user credential that does not exist: {name}"
                )
            results.append(
                {
                    "user": name,
                    "error_code": error.code if error else 0,
                    "error_message": error.message if error else None,
                    "credential_infos": []
                    if error
                    else [
                        {"mechanism": SCRAM_CODES_BY_NAME[m], "iterations": c.iterations}
                        for m, c in sorted(users[name].items())
                    ],
                }
            )
        return {"throttle_time": 0, "error_code": 0, "error_message": None, "results": results}

    async def _alter_user_scram_credentials(
        self, request: KafkaRequest, context: RequestContext
    ) -> dict:
        body = request.body
        deletions, upsertions = body["deletions"], body["upsertions"]
        denied = self._authorizer.cluster_denial(context, "Alter")
        names = [entry["name"] for entry in (*deletions, *upsertions)]
        if denied is not None:
            return {
                "throttle_time": 0,
                "results": [
                    {"user": name, "error_code": denied.code, "error_message": denied.message}
                    for name in dict.fromkeys(names)
                ],
            }
        errors: dict[str, KafkaError] = {}
        seen: Counter[tuple[str, int]] = Counter(
            (entry["name"], entry["mechanism"]) for entry in (*deletions, *upsertions)
        )
        for (name, mechanism), count in seen.items():
            if count > 1:
                errors.setdefault(
                    name, DuplicateResourceError(f"user {name} is altered twice for one mechanism")
                )
            if mechanism not in SCRAM_MECHANISM_CODES:
                errors.setdefault(
                    name, UnsupportedSaslMechanismError(f"unknown SCRAM mechanism {mechanism}")
                )
            if not name:
                errors.setdefault(name, UnacceptableCredentialError("user name is empty"))
        for entry in upsertions:
            if not MIN_ITERATIONS <= entry["iterations"] <= MAX_ITERATIONS:
                errors.setdefault(
                    entry["name"],
                    UnacceptableCredentialError(
                        f"iterations {entry['iterations']} is outside "
                        f"{MIN_ITERATIONS}..{MAX_ITERATIONS}"
                    ),
                )
            elif not entry["salt"] or not entry["salted_password"]:
                errors.setdefault(
                    entry["name"], UnacceptableCredentialError("salt or salted password is empty")
                )

        def apply() -> None:
            for entry in deletions:
                name = entry["name"]
                if name in errors:
                    continue
                mechanism = SCRAM_MECHANISM_CODES[entry["mechanism"]]
                if not self._credentials.delete(name, mechanism):
                    errors[name] = ResourceNotFoundError(
                        f"attempt to delete a user credential that does not exist: {name} "
                        f"{mechanism}"
                    )
            for entry in upsertions:
                name = entry["name"]
                if name in errors:
                    continue
                mechanism = SCRAM_MECHANISM_CODES[entry["mechanism"]]
                self._credentials.upsert(
                    name,
                    ScramCredential.from_salted_password(
                        mechanism, entry["salt"], entry["salted_password"], entry["iterations"]
                    ),
                )

        await self._in_thread(apply)
        return {
            "throttle_time": 0,
            "results": [
                {
                    "user": name,
                    "error_code": errors[name].code if name in errors else 0,
                    "error_message": errors[name].message if name in errors else None,
                }
                for name in dict.fromkeys(names)
            ],
        }

    async def _in_thread(self, function: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._executor, function)


def _authenticator(context: RequestContext) -> Any:
    session = context.session
    return session.authenticator if session is not None else None


def _top_error(error: KafkaError, list_name: str) -> dict:
    return {
        "throttle_time": 0,
        "error_code": error.code,
        "error_message": error.message,
        list_name: [],
    }
