/* rdkperf -consume: read a topic from its beginning as fast as librdkafka can, touching
 * only each message's length (see rdkperf.c).
 *
 *   rdkperf -consume BROKERS TOPIC PARTITIONS COUNT [key=value ...]
 *
 * PARTITIONS is a count N (partitions 0..N-1) or a list "0,2,4". They are read with the
 * simple consumer (no group, no commits) into one queue, in batches, until COUNT records
 * have arrived; it prints
 * {"records":..,"bytes":..,"seconds":..} with the time from the first fetch request to
 * the last record, and "first_at", "first_bytes", "last_at": the CLOCK_MONOTONIC seconds
 * of the first batch's arrival, its bytes, and the last's arrival, so the caller can
 * leave out the client's start (connection, metadata, offset lookup) as Kafka's
 * kafka-consumer-perf-test does in its fetch.MB.sec. "first_offsets" and "last_offsets"
 * are the sums over the partitions of the offset after the last record seen, after the
 * first batch and at the end: the log range read meanwhile, which a read_committed
 * consumer also crosses where it delivers nothing (aborted records, markers).
 * Exit status 1 on a consume error or when COUNT is not reached in 600 s.
 */
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BATCH 10000

static double seconds_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int consume_main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: rdkperf -consume BROKERS TOPIC PARTITIONS COUNT [key=value ...]\n");
        return 2;
    }
    char err[512];
    int list[1024], partitions = 0;
    if (strchr(argv[3], ',')) {
        for (char *part = strtok(argv[3], ","); part && partitions < 1024; part = strtok(NULL, ","))
            list[partitions++] = atoi(part);
    } else {
        partitions = atoi(argv[3]);
        for (int p = 0; p < partitions && p < 1024; p++)
            list[p] = p;
    }
    long count = atol(argv[4]);
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    if (rd_kafka_conf_set(conf, "bootstrap.servers", argv[1], err, sizeof err) ||
        rd_kafka_conf_set(conf, "enable.partition.eof", "false", err, sizeof err)) {
        fprintf(stderr, "rdkperf: %s\n", err);
        return 2;
    }
    for (int i = 5; i < argc; i++) {
        char key[256];
        const char *eq = strchr(argv[i], '=');
        if (!eq || (size_t)(eq - argv[i]) >= sizeof key) {
            fprintf(stderr, "rdkperf: expected key=value, got %s\n", argv[i]);
            return 2;
        }
        memcpy(key, argv[i], (size_t)(eq - argv[i]));
        key[eq - argv[i]] = '\0';
        if (rd_kafka_conf_set(conf, key, eq + 1, err, sizeof err)) {
            fprintf(stderr, "rdkperf: %s\n", err);
            return 2;
        }
    }
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    if (!rk) {
        fprintf(stderr, "rdkperf: %s\n", err);
        return 2;
    }
    rd_kafka_topic_t *topic = rd_kafka_topic_new(rk, argv[2], NULL);
    rd_kafka_queue_t *queue = rd_kafka_queue_new(rk);
    double t0 = seconds_now();
    for (int i = 0; i < partitions; i++) {
        if (rd_kafka_consume_start_queue(topic, list[i], RD_KAFKA_OFFSET_BEGINNING, queue) == -1) {
            fprintf(stderr, "rdkperf: start partition %d: %s\n", list[i],
                    rd_kafka_err2str(rd_kafka_last_error()));
            return 1;
        }
    }
    rd_kafka_message_t **batch = calloc(BATCH, sizeof *batch);
    long records = 0, bytes = 0, errors = 0, first_bytes = -1;
    static long long next_offset[1024]; /* by partition id */
    long long offsets = 0, first_offsets = 0;
    double last = t0, first = t0;
    while (records < count && seconds_now() - t0 < 600) {
        /* Ask for no more than is still due: a batch call waits out its timeout unless
         * the batch fills, and a last batch asked for in full would count that wait. */
        size_t want = count - records < BATCH ? (size_t)(count - records) : BATCH;
        ssize_t n = rd_kafka_consume_batch_queue(queue, 1000, batch, want);
        for (ssize_t i = 0; i < n; i++) {
            if (batch[i]->err) {
                if (errors++ == 0)
                    fprintf(stderr, "rdkperf: consume: %s\n", rd_kafka_message_errstr(batch[i]));
            } else {
                records++;
                bytes += (long)batch[i]->len;
                int32_t p = batch[i]->partition;
                if (p >= 0 && p < 1024 && batch[i]->offset + 1 > next_offset[p]) {
                    offsets += batch[i]->offset + 1 - next_offset[p];
                    next_offset[p] = batch[i]->offset + 1;
                }
            }
            rd_kafka_message_destroy(batch[i]);
        }
        if (n > 0) {
            last = seconds_now();
            if (first_bytes < 0) {
                first = last;
                first_bytes = bytes;
                first_offsets = offsets;
            }
        }
    }
    printf("{\"records\": %ld, \"bytes\": %ld, \"seconds\": %.6f, \"errors\": %ld, "
           "\"first_at\": %.6f, \"first_bytes\": %ld, \"last_at\": %.6f, "
           "\"first_offsets\": %lld, \"last_offsets\": %lld}\n",
           records, bytes, last - t0, errors, first, first_bytes < 0 ? 0 : first_bytes, last,
           first_offsets, offsets);
    for (int i = 0; i < partitions; i++)
        rd_kafka_consume_stop(topic, list[i]);
    free(batch);
    rd_kafka_queue_destroy(queue);
    rd_kafka_topic_destroy(topic);
    rd_kafka_destroy(rk);
    return errors || records < count ? 1 : 0;
}
