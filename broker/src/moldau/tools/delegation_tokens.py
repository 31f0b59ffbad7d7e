"""kafka-delegation-tokens: create, renew, expire and describe delegation tokens through
the admin API (CreateDelegationToken, RenewDelegationToken, ExpireDelegationToken,
DescribeDelegationToken), with Kafka 3.9's DelegationTokenCommand options, lines and
table.

As in Kafka 3.9, `--command-config` is required (token requests are refused on
PLAINTEXT: the properties carry the SASL or TLS login), and `--describe` without
`--owner-principal` sends an empty owner list, which the broker answers with no tokens;
name the owners (or renewers) to list theirs. Dates print in the local time zone as
`yyyy-MM-dd'T'HH:mm`, and a failure prints on stderr what 3.9.1's tool (the Java one in
kafka-tools) prints: the exception's message, then the exception with its causes.
"""

from __future__ import annotations

import base64
import binascii
import string
import sys
import time
from collections.abc import Sequence
from typing import Any

from moldau.protocol.generated.api import APIS
from moldau.protocol.generated.create_delegation_token_request import (
    CreateDelegationTokenRequest,
)
from moldau.protocol.generated.describe_delegation_token_request import (
    DescribeDelegationTokenRequest,
)
from moldau.security.delegation_tokens import parse_principal
from moldau.security.principal import KafkaPrincipal
from moldau.tools.admin import Admin
from moldau.tools.common import admin_from
from moldau.tools.kafka_errors import KafkaToolError, error_text, exception_class
from moldau.tools.options import LONG, Opt, Options, ToolError, UsageError, forbid, require
from moldau.tools.runner import Tool

PURPOSE = "This tool helps to create, renew, expire, or describe delegation tokens."
ACTIONS = ("create", "renew", "expire", "describe")
ONE_ACTION = "Command must include exactly one action: --create, --renew, --expire or --describe"
ERRORS_PACKAGE = "org.apache.kafka.common.errors"
# the newest version of each request Moldau's tool sends (Kafka 3.9's AdminClient's)
LATEST = {"CreateDelegationToken": 3, "RenewDelegationToken": 2, "ExpireDelegationToken": 2,
          "DescribeDelegationToken": 3}

OPTIONS = [
    Opt("bootstrap-server", "REQUIRED: server(s) to use for bootstrapping.",
        ""),
    Opt("command-config", "REQUIRED: A property file containing configs to be passed to Admin "
        "Client. Token management operations are allowed in secure mode only. This config "
        "file is used to pass security related configs.", ""),
    Opt("create", "Create a new delegation token. Use --renewer-principal option to pass "
        "renewer principals."),
    Opt("renew", "Renew delegation token. Use --renew-time-period option to set renew time "
        "period."),
    Opt("expire", "Expire delegation token. Use --expiry-time-period option to expire the "
        "token."),
    Opt("describe", "Describe delegation tokens for the given principals. Use "
        "--owner-principal to pass owner/renewer principals. If --owner-principal option is "
        "not supplied, all the user-owned tokens and tokens where the user has Describe "
        "permissions will be returned."),
    Opt("owner-principal", "owner is a Kafka principal. They should be in principalType:name "
        "format.", "", optional=True),
    Opt("renewer-principal", "renewer is a Kafka principal. They should be in "
        "principalType:name format.", "", optional=True),
    Opt("max-life-time-period", "Max life period for the token in milliseconds. If the value "
        "is -1, then token max life time will default to the server side config value of "
        "(delegation.token.max.lifetime.ms).", "", LONG, optional=True),
    Opt("renew-time-period", "Renew time period in milliseconds. If the value is -1, then the "
        "renew time period will default to the server side config value of "
        "(delegation.token.expiry.time.ms).", "", LONG, optional=True),
    Opt("expiry-time-period", "Expiry time period in milliseconds. If the value is -1, then "
        "the token will get invalidated immediately.", "", LONG,
        optional=True),
    Opt("hmac", "HMAC of the delegation token", "", optional=True),
]


class CommandFailure(ToolError):
    """What DelegationTokenCommand's catch prints: the exception's message, then its stack
    trace (Moldau has no frames: the exception lines alone)."""

    def __init__(self, message: str, trace: list[str]) -> None:
        super().__init__(message)
        self.trace = trace


def _exception(code: int, message: str | None = None) -> str:
    """Kafka's exception for an error code, as Throwable.toString prints it."""
    return f"{exception_class(code)}: {error_text(code, message)}"


def _failed_future(cause: str) -> CommandFailure:
    """The admin API's future failed: get() throws an ExecutionException around it."""
    return CommandFailure(cause, [f"java.util.concurrent.ExecutionException: {cause}",
                                  f"Caused by: {cause}"])


def _check(code: int) -> None:
    if code:
        raise _failed_future(_exception(code))


def _illegal_argument(message: str) -> CommandFailure:
    return CommandFailure(message, [f"java.lang.IllegalArgumentException: {message}"])


def principals(options: Options, name: str) -> list[KafkaPrincipal]:
    """The principals given with an option (Kafka's getPrincipals: each trimmed)."""
    try:
        return [parse_principal(str(v).strip()) for v in options.all(name) if v != ""]
    except ValueError as exc:
        raise _illegal_argument(str(exc)) from None


def java_list(items: Sequence[object]) -> str:
    """A Java List's toString: [a, b]."""
    return "[" + ", ".join(str(i) for i in items) + "]"


def java_long(value: int | str | None) -> str:
    """A Long option's value as Java prints it; an option given without one is null."""
    return "null" if value is None or value == "" else str(value)


def date(ms: int) -> str:
    """SimpleDateFormat("yyyy-MM-dd'T'HH:mm") in the local time zone."""
    return time.strftime("%Y-%m-%dT%H:%M", time.localtime(ms / 1000))


def decode_hmac(text: str) -> bytes:
    """Base64.getDecoder().decode, with its message for a bad character."""
    for char in text:
        if char not in string.ascii_letters + string.digits + "+/=":
            raise _illegal_argument(f"Illegal base64 character {ord(char):x}")
    try:
        return base64.b64decode(text, validate=True)
    except binascii.Error as exc:
        raise _illegal_argument(f"Input byte array has an incorrect ending byte ({exc})") from None


def version(admin: Admin, name: str) -> int:
    """The newest version both sides speak (the AdminClient's negotiation)."""
    low, high = admin.api_versions().get(_api_key(name), (0, -1))
    if high < low:
        raise _failed_future(f"{ERRORS_PACKAGE}.UnsupportedVersionException: The broker does "
                             f"not support {name}")
    return min(high, LATEST[name])


def _api_key(name: str) -> int:
    return next(spec.key for spec in APIS.values() if spec.name == name)


def _call(admin: Admin, name: str, **fields: Any) -> Any:  # Any: the request's fields, its response
    try:
        return admin.call(name, version(admin, name), **fields)
    except KafkaToolError as exc:  # the connection's SASL login was refused
        raise _failed_future(f"{exc.exception_class}: {exc}") from None


class Row:
    """One token as the table prints it."""

    def __init__(self, token_id: str, hmac: bytes, owner: str, requester: str,
                 renewers: Sequence[str], issue: int, expiry: int, max_ms: int) -> None:
        self.cells = [token_id, base64.b64encode(hmac).decode("ascii"), owner, requester,
                      java_list(renewers), date(issue), date(expiry), date(max_ms)]


def table(rows: Sequence[Row]) -> str:
    """printToken: a header after an empty line, each token after an empty line."""
    widths = (15, 30, 15, 15, 25, 15, 15, 15)

    def line(cells: Sequence[str]) -> str:
        return " ".join(f"{c:<{w}}" for c, w in zip(cells, widths, strict=True))

    header = ("TOKENID", "HMAC", "OWNER", "REQUESTER", "RENEWERS", "ISSUEDATE", "EXPIRYDATE",
              "MAXDATE")
    return "\n" + line(header) + "\n" + "".join(f"\n{line(r.cells)}\n" for r in rows)


def _principal_text(kind: str, name: str) -> str:
    return str(KafkaPrincipal(name, kind))


# --- the actions ---------------------------------------------------------------------------


def create(admin: Admin, options: Options) -> None:
    renewers = principals(options, "renewer-principal")
    lifetime = options.get("max-life-time-period")
    print(f"Calling create token operation with renewers :{java_list(renewers)} , "
          f"max-life-time-period :{java_long(lifetime)}", flush=True)
    if lifetime is None or lifetime == "":  # Kafka unboxes the missing value
        raise CommandFailure("null", ["java.lang.NullPointerException"])
    owners = principals(options, "owner-principal")
    fields: dict[str, Any] = {"max_lifetime_ms": lifetime, "renewers": [
        CreateDelegationTokenRequest.CreatableRenewers(principal_type=r.type,
                                                       principal_name=r.name)
        for r in renewers]}
    if owners:  # the first owner named (KIP-373): a token for another user
        fields.update(owner_principal_type=owners[0].type, owner_principal_name=owners[0].name)
    answer = _call(admin, "CreateDelegationToken", **fields)
    _check(answer.error_code)
    print(f"Created delegation token with tokenId : {answer.token_id}")
    print(table([Row(answer.token_id, bytes(answer.hmac),
                     _principal_text(answer.principal_type, answer.principal_name),
                     _principal_text(answer.token_requester_principal_type,
                                     answer.token_requester_principal_name),
                     [str(r) for r in renewers], answer.issue_timestamp_ms,
                     answer.expiry_timestamp_ms, answer.max_timestamp_ms)]), end="")


def renew(admin: Admin, options: Options) -> None:
    hmac, period = options.get("hmac"), options.get("renew-time-period")
    print(f"Calling renew token operation with hmac :{hmac or 'null'} , "
          f"renew-time-period :{java_long(period)}", flush=True)
    answer = _call(admin, "RenewDelegationToken", hmac=decode_hmac(hmac or ""),
                   renew_period_ms=_long(period))
    _check(answer.error_code)
    print(f"Completed renew operation. New expiry date : {date(answer.expiry_timestamp_ms)}",
          end="")


def expire(admin: Admin, options: Options) -> None:
    hmac, period = options.get("hmac"), options.get("expiry-time-period")
    print(f"Calling expire token operation with hmac :{hmac or 'null'} , "
          f"expire-time-period :{java_long(period)}", flush=True)
    answer = _call(admin, "ExpireDelegationToken", hmac=decode_hmac(hmac or ""),
                   expiry_time_period_ms=_long(period))
    _check(answer.error_code)
    print(f"Completed expire operation. New expiry date : {date(answer.expiry_timestamp_ms)}",
          end="")


def describe(admin: Admin, options: Options) -> None:
    owners = principals(options, "owner-principal")
    if owners:
        print(f"Calling describe token operation for owners: {java_list(owners)}", flush=True)
    else:
        print("Calling describe token operation for current user.", flush=True)
    Owner_ = DescribeDelegationTokenRequest.DescribeDelegationTokenOwner
    answer = _call(admin, "DescribeDelegationToken", owners=[
        Owner_(principal_type=o.type, principal_name=o.name) for o in owners])
    _check(answer.error_code)
    rows = [Row(t.token_id, bytes(t.hmac), _principal_text(t.principal_type, t.principal_name),
                _principal_text(t.token_requester_principal_type,
                                t.token_requester_principal_name),
                [_principal_text(r.principal_type, r.principal_name) for r in t.renewers],
                t.issue_timestamp, t.expiry_timestamp, t.max_timestamp)
            for t in answer.tokens]
    print(f"Total number of tokens : {len(rows)}" + table(rows), end="")


def _long(value: int | str | None) -> int:
    if value is None or value == "":
        raise CommandFailure("null", ["java.lang.NullPointerException"])
    return int(value)


# --- the command line ----------------------------------------------------------------------


def check_args(options: Options) -> str:
    """DelegationTokenCommandOptions.checkArgs, after the one-action check."""
    actions = [a for a in ACTIONS if options.has(a)]
    if len(actions) != 1:
        raise UsageError(ONE_ACTION)
    action = actions[0]
    require(options, "bootstrap-server", "command-config")
    required = {"create": ("max-life-time-period",), "renew": ("hmac", "renew-time-period"),
                "expire": ("hmac", "expiry-time-period"), "describe": ()}
    require(options, *required[action])
    forbid(options, "create", "hmac", "renew-time-period", "expiry-time-period")
    forbid(options, "renew", "renewer-principal", "max-life-time-period", "expiry-time-period",
           "owner-principal")
    forbid(options, "expire", "renew", "max-life-time-period", "renew-time-period",
           "owner-principal")
    forbid(options, "describe", "renew-time-period", "max-life-time-period", "hmac",
           "expiry-time-period")
    return action


def run(options: Options) -> int:
    action = check_args(options)
    try:
        with admin_from(options) as admin:
            {"create": create, "renew": renew, "expire": expire, "describe": describe}[action](
                admin, options)
    except CommandFailure as exc:
        sys.stdout.flush()
        print(exc, file=sys.stderr)
        print("\n".join(exc.trace) + "\n", file=sys.stderr)
        return 1
    return 0


TOOL = Tool("delegation-tokens", PURPOSE, OPTIONS, run)


def console_main() -> None:
    """kafka-delegation-tokens.sh (and kafka-delegation-tokens)."""
    sys.exit(TOOL.main(sys.argv[1:]))
