"""The cluster scenarios' normalisation without a lab: TopicCommand's topics (a Java
HashMap's order of names that hold the run's token) and --generate's proposed replicas
(a random start broker) are sorted; everything else stays in place."""

from __future__ import annotations

import json

from compat.scenarios.tools_cluster import sort_proposed_replicas, sort_topic_blocks


def test_topic_blocks_are_sorted_by_topic_keeping_each_topics_lines() -> None:
    lines = [
        "$ kafka-topics --describe --topic t.*",
        "Topic: t-single\tTopicId: x\tPartitionCount: 1",
        "\tTopic: t-single\tPartition: 0\tLeader: 3",
        "Topic: t\tTopicId: y\tPartitionCount: 2",
        "\tTopic: t\tPartition: 0\tLeader: 1",
        "\tTopic: t\tPartition: 1\tLeader: 2",
        "exit 0",
        "\tTopic: b\tPartition: 0\tLeader: 1",
        "\tTopic: a\tPartition: 1\tLeader: 2",
    ]
    assert sort_topic_blocks(lines) == [
        "$ kafka-topics --describe --topic t.*",
        "Topic: t\tTopicId: y\tPartitionCount: 2",
        "\tTopic: t\tPartition: 0\tLeader: 1",
        "\tTopic: t\tPartition: 1\tLeader: 2",
        "Topic: t-single\tTopicId: x\tPartitionCount: 1",
        "\tTopic: t-single\tPartition: 0\tLeader: 3",
        "exit 0",
        "\tTopic: a\tPartition: 1\tLeader: 2",
        "\tTopic: b\tPartition: 0\tLeader: 1",
    ]


def test_only_the_proposed_plan_has_its_replicas_sorted() -> None:
    def plan(replicas: list[int]) -> str:
        return json.dumps({"version": 1, "partitions": [
            {"topic": "t", "partition": 0, "replicas": replicas,
             "log_dirs": ["any", "any"]}]}, separators=(",", ":"))

    lines = ["Current partition replica assignment", plan([2, 1]), "",
             "Proposed partition reassignment configuration", plan([2, 1])]
    assert sort_proposed_replicas(lines) == [
        "Current partition replica assignment", plan([2, 1]), "",
        "Proposed partition reassignment configuration", plan([1, 2])]
