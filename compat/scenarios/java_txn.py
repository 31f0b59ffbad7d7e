"""Kafka's transactional producer (kafka-clients 3.9.1) against both brokers, then Kafka's
TransactionsCommand aborting a hanging transaction. compat/java/TxnTranscript.java
commits and aborts transactions over two partitions, consumes-transforms-produces with
sendOffsetsToTransaction, is fenced by a second producer of its transactional.id, and
prints what read_committed and read_uncommitted consumers, the group's committed offsets
and listOffsets (the LSO) show. Then a producer halts mid-transaction; TransactionsCommand
find-hanging and abort (at the transaction's first offset) run against the broker, and
a read_committed consumer sees the LSO past the aborted records."""

from __future__ import annotations

from compat import javac, launcher
from compat.scenarios.base import KAFKA, MOLDAU, Context, Scenario, Side, kafka_tools
from compat.transcript import Transcript

MAIN_CLASS = "TxnTranscript"
TRANSACTIONS_COMMAND = "org.apache.kafka.tools.TransactionsCommand"


def run_java(transcript: Transcript, ctx: Context, mode: str) -> str:
    args = [ctx.bootstrap, f"jt-{ctx.token}", mode]
    run = launcher.run_tool(MAIN_CLASS, args, extra_classpath=[str(javac.classes_dir())],
                            timeout=180)
    transcript.command(MAIN_CLASS, args, run, stderr=False)
    return run.stdout


def run_transactions(ctx: Context) -> Transcript:
    transcript = Transcript()
    run_java(transcript, ctx, "main")
    hang = run_java(transcript, ctx, "hang")
    start = [line.split()[1] for line in hang.splitlines() if line.startswith("start-offset ")]
    if start:
        boot = ["--bootstrap-server", ctx.bootstrap]
        # The killed producer's transaction is still Ongoing at its coordinator, so
        # find-hanging (which skips what a coordinator will still finish) lists nothing;
        # abort writes the marker itself, by the partition's producer state.
        find = [*boot, "find-hanging", "--broker-id", "1", "--max-transaction-timeout", "0"]
        kafka_tools(transcript, TRANSACTIONS_COMMAND, "kafka-transactions",
                    [find, [*boot, "abort", "--topic", f"jt-{ctx.token}-hang", "--partition", "0",
                            "--start-offset", start[0]]])
    run_java(transcript, ctx, "after")
    transcript.note = f"exits {' '.join(map(str, transcript.exit_codes))}"
    return transcript


SCENARIOS = [
    Scenario("java-client.transactions",
             "kafka-clients 3.9.1 transactional producer: commit, abort, "
             "sendOffsetsToTransaction, fencing, read_committed; kafka-transactions abort",
             Side("java-txn@kafka", KAFKA, run_transactions),
             Side("java-txn@moldau", MOLDAU, run_transactions),
             fast=False),
]
