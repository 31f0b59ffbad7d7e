"""kafka-leader-election (Kafka 3.9's LeaderElectionCommand) and the older
kafka-preferred-replica-election form: ElectLeaders sent to the controller."""

from __future__ import annotations

import json
import time

from moldau.protocol.generated.elect_leaders_request import ElectLeadersRequest
from moldau.tools.admin import Admin
from moldau.tools.common import client_config
from moldau.tools.kafka_errors import ADMIN_FAILED, check, error_text
from moldau.tools.options import Opt, Options, require
from moldau.tools.runner import ArgumentError, Tool

TYPES = {"PREFERRED": 0, "UNCLEAN": 1}
ELECTION_NOT_NEEDED, NOT_CONTROLLER = 84, 41
EXCEPTIONS = {3: "UnknownTopicOrPartitionException", 5: "LeaderNotAvailableException",
              7: "TimeoutException", 31: "ClusterAuthorizationException",
              41: "NotControllerException", 42: "InvalidRequestException",
              80: "PreferredLeaderNotAvailableException",
              83: "EligibleLeadersNotAvailableException",
              60: "ReassignmentInProgressException"}
JSON_HELP = ("The JSON file with the list  of partition for which leader elections should be "
             "performed. This is an example format. \n{\"partitions\":\n\t[{\"topic\": "
             "\"foo\", \"partition\": 1},\n\t {\"topic\": \"foobar\", \"partition\": 2}]\n}\n"
             "Not allowed if --all-topic-partitions or --topic flags are specified.")

OPTIONS = [
    Opt("bootstrap-server", "A hostname and port for the broker to connect to, in the form "
        "host:port. Multiple comma separated URLs can be given. REQUIRED.", "host:port"),
    Opt("admin.config", "Configuration properties files to pass to the admin client",
        "config file"),
    Opt("path-to-json-file", JSON_HELP, "Path to JSON file"),
    Opt("topic", "Name of topic for which to perform an election. Not allowed if "
        "--path-to-json-file or --all-topic-partitions is specified.", "topic name"),
    Opt("partition", "Partition id for which to perform an election. REQUIRED if --topic is "
        "specified.", "partition id", int),
    Opt("all-topic-partitions", "Perform election on all of the eligible topic partitions "
        "based on the type of election (see the --election-type flag). Not allowed if "
        "--topic or --path-to-json-file is specified."),
    Opt("election-type", "Type of election to attempt. Possible values are \"preferred\" for "
        "preferred leader election or \"unclean\" for unclean leader election. If preferred "
        "election is selection, the election is only performed if the current leader is "
        "not the preferred leader for the topic partition. If unclean election is selected, "
        "the election is only performed if there are no leader for the topic partition. "
        "REQUIRED.", "election type", label="[PREFERRED,UNCLEAN]"),
]




def failure(message: str, exception: str = ADMIN_FAILED, *details: str) -> ArgumentError:
    """Kafka 3.9's LeaderElectionCommand ends on any exception with its message, then the
    exception and what it carries (`details`: Caused by, Suppressed; the stack frames
    Moldau has none of) and an empty line, all on stderr."""
    return ArgumentError("\n".join([message, f"{exception}: {message}", *details, ""]))


def read_partitions(path: str) -> list[tuple[str, int]]:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except OSError as exc:
        raise ArgumentError(f"{path} ({exc.strerror})") from None
    except json.JSONDecodeError as exc:
        raise ArgumentError(f"The input string is not a valid JSON: {exc}") from None
    try:
        wanted = [(str(p["topic"]), int(p["partition"])) for p in data["partitions"]]
    except (KeyError, TypeError, ValueError):
        raise ArgumentError("Replica election data is missing \"partitions\" field or it "
                            "is malformed") from None
    duplicates = sorted({f"{t}-{p}" for t, p in wanted if wanted.count((t, p)) > 1})
    if duplicates:
        raise ArgumentError("Replica election data contains duplicate partitions: "
                            + ",".join(duplicates))
    return wanted


def elect(admin: Admin, election: str, wanted: list[tuple[str, int]] | None) -> int:
    topics: dict[str, list[int]] = {}
    for topic, partition in wanted or []:
        topics.setdefault(topic, []).append(partition)
    request = None if wanted is None else [
        ElectLeadersRequest.TopicPartitions(topic=t, partitions=ps) for t, ps in topics.items()]
    deadline = time.monotonic() + admin.timeout
    while True:
        answer = admin.call("ElectLeaders", 2, admin.controller_id(),
                            election_type=TYPES[election], topic_partitions=request,
                            timeout_ms=int(admin.timeout * 1000))
        check(answer.error_code)
        results = [(r.topic, p.partition_id, p.error_code, p.error_message)
                   for r in answer.replica_election_results for p in r.partition_result]
        if all(code != NOT_CONTROLLER for *_, code, _ in results) or \
                time.monotonic() > deadline:
            break
        time.sleep(0.2)
    return report(election, results)


def report(election: str, results: list[tuple[str, int, int, str | None]]) -> int:
    """Print the (topic, partition, error code, error message) results as Kafka does."""
    done = [f"{t}-{p}" for t, p, code, _ in results if code == 0]
    noop = [f"{t}-{p}" for t, p, code, _ in results if code == ELECTION_NOT_NEEDED]
    failed = [(f"{t}-{p}", code, msg) for t, p, code, msg in results
              if code not in (0, ELECTION_NOT_NEEDED)]
    if done:
        print(f"Successfully completed leader election ({election}) for partitions "
              + ", ".join(done))
    if noop:
        print("Valid replica already elected for partitions " + ", ".join(noop))
    for name, code, message in failed:
        print(f"Error completing leader election ({election}) for partition: {name}: "
              f"org.apache.kafka.common.errors.{EXCEPTIONS.get(code, 'ApiException')}: "
              f"{error_text(code, message)}")
    if failed:
        raise failure(f"{len(failed)} replica(s) could not be elected", ADMIN_FAILED, *(
            f"\tSuppressed: org.apache.kafka.common.errors."
            f"{EXCEPTIONS.get(code, 'ApiException')}: {error_text(code, message)}"
            for _, code, message in failed))
    return 0


def run(options: Options) -> int:
    # Kafka 3.9's checks, in its order: the election type's value (jopt-simple's
    # conversion), the required options, then the choice of partitions
    election = (options.get("election-type") or "").upper()
    if options.has("election-type") and election not in TYPES:
        given_type = options.get("election-type")
        raise failure(f"Cannot parse argument '{given_type}' of option election-type",
                      "joptsimple.OptionArgumentConversionException",
                      f"Caused by: joptsimple.ValueConversionException: Value [{given_type}] "
                      "is not one of [[PREFERRED,UNCLEAN]]")
    missing = [o for o in ("bootstrap-server", "election-type") if not options.has(o)]
    if missing:
        raise failure(f"Missing required option(s): {', '.join(missing)}")
    given = [o for o in ("topic", "all-topic-partitions", "path-to-json-file")
             if options.has(o)]
    if len(given) != 1:
        raise failure("One and only one of the following options is required: "
                      "topic, all-topic-partitions, path-to-json-file")
    if options.has("topic") and not options.has("partition"):
        raise failure("Missing required option(s): partition")
    if options.has("partition") and not options.has("topic"):
        raise failure("Option partition is only allowed if topic is used")
    wanted: list[tuple[str, int]] | None = None
    if options.has("topic"):
        wanted = [(options.get("topic"), options.get("partition"))]
    elif options.has("path-to-json-file"):
        wanted = read_partitions(options.get("path-to-json-file"))
    config = client_config(options, "admin.config")
    with Admin(options.get("bootstrap-server"), config) as admin:
        return elect(admin, election, wanted)


def run_preferred(options: Options) -> int:
    """The pre-3.0 kafka-preferred-replica-election.sh form: every partition, or the
    partitions of --path-to-json-file."""
    require(options, "bootstrap-server")
    wanted = (read_partitions(options.get("path-to-json-file"))
              if options.has("path-to-json-file") else None)
    with Admin(options.get("bootstrap-server"), client_config(options, "admin.config")) as admin:
        return elect(admin, "PREFERRED", wanted)


TOOL = Tool("leader-election", "This tool attempts to elect a new leader for a set of topic "
            "partitions. The type of elections supported are preferred replicas and unclean "
            "replicas.", OPTIONS, run, "Error: ")
PREFERRED_TOOL = Tool(
    "preferred-replica-election", "This tool helps to cause leadership for each partition to "
    "be transferred back to the 'preferred replica', it can be used to balance leadership "
    "among the servers.", [o for o in OPTIONS if o.name in (
        "bootstrap-server", "admin.config", "path-to-json-file")], run_preferred, "Error: ")
