"""The ACL scenarios' normalisation without a lab: kafka-acls blocks compared as sets
(Kafka prints them in a hash order), everything else kept in place."""

from __future__ import annotations

from compat.normalise import apply_all
from compat.scenarios.acl_output import STDOUT_FRAMES, sort_acl_blocks

TOPIC = "`ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)`: "
GROUP = "`ResourcePattern(resourceType=GROUP, name=g, patternType=LITERAL)`: "
BOB_WRITE = "(principal=User:bob, host=*, operation=WRITE, permissionType=ALLOW)"
ALICE_READ = "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)"


def test_entries_and_blocks_of_one_kind_are_sorted() -> None:
    kafka = [
        "$ kafka-acls --list",
        f"Current ACLs for resource {TOPIC}",
        f" \t{BOB_WRITE}",
        f"\t{ALICE_READ} ",
        "",
        f"Current ACLs for resource {GROUP}",
        f" \t{ALICE_READ} ",
        "",
        "exit 0",
    ]
    assert sort_acl_blocks(kafka) == [
        "$ kafka-acls --list",
        f"Current ACLs for resource {GROUP}",
        f" \t{ALICE_READ} ",
        "",
        f"Current ACLs for resource {TOPIC}",
        f" \t{ALICE_READ}",
        f"\t{BOB_WRITE} ",
        "",
        "exit 0",
    ]


def test_additions_stay_before_the_listing_and_principals_keep_their_order() -> None:
    lines = [
        f"Adding ACLs for resource {TOPIC}", f" \t{BOB_WRITE} ", "",
        f"Current ACLs for resource {GROUP}", f" \t{ALICE_READ} ", "",
        "ACLs for principal `User:bob`",
        f"Current ACLs for resource {TOPIC}", f" \t{BOB_WRITE} ", "",
        "ACLs for principal `User:alice`",
    ]
    assert sort_acl_blocks(lines) == lines


def test_stack_frames_on_stdout_go_the_exception_stays() -> None:
    raw = ["Error while executing ACL command: boom",
           "java.util.concurrent.ExecutionException: boom",
           "\tat java.base/java.util.concurrent.CompletableFuture.get(CompletableFuture.java:2073)",
           "\t... 3 more",
           "Caused by: boom", ""]
    assert apply_all(raw, [STDOUT_FRAMES]) == [
        "Error while executing ACL command: boom",
        "java.util.concurrent.ExecutionException: boom", "Caused by: boom", ""]
