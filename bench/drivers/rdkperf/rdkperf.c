/* rdkperf: tight librdkafka drivers for the peer benchmarks (bench/peers.py), built by
 * bench/_peer_servers.py with gcc and Debian's librdkafka-dev.
 *
 *   rdkperf BROKERS TOPIC COUNT SIZE PARTITIONS [key=value ...]
 *   rdkperf -e2e BROKERS TOPIC RATE SECONDS SIZE [key=value ...]
 *   rdkperf -consume BROKERS TOPIC PARTITIONS COUNT [key=value ...]
 *
 * The first produces COUNT records of SIZE bytes, round-robin over PARTITIONS, from one
 * static buffer (librdkafka does not copy it), and waits for every delivery report;
 * it prints {"records":..,"bytes":..,"seconds":..,"failed":..}. Exit status 1 if any
 * delivery failed.
 *
 * -e2e (e2e.c) sends RATE records/s for SECONDS to partition 0 of a fresh topic while a
 * consumer thread reads it, and prints the latencies as bench/drivers/peerbench does.
 *
 * -consume (consume.c) reads a topic from the beginning (bench/broker.py).
 */
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long delivered, failed;

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
    (void)rk;
    (void)opaque;
    if (m->err) {
        if (failed++ == 0)
            fprintf(stderr, "rdkperf: delivery failed: %s\n", rd_kafka_err2str(m->err));
    } else {
        delivered++;
    }
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int e2e_main(int argc, char **argv);
int consume_main(int argc, char **argv);

int main(int argc, char **argv) {
    char err[512];
    if (argc > 1 && strcmp(argv[1], "-e2e") == 0)
        return e2e_main(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "-consume") == 0)
        return consume_main(argc - 1, argv + 1);
    if (argc < 6) {
        fprintf(stderr, "usage: rdkperf BROKERS TOPIC COUNT SIZE PARTITIONS [key=value ...]\n");
        return 2;
    }
    long count = atol(argv[3]);
    size_t size = (size_t)atol(argv[4]);
    int partitions = atoi(argv[5]);
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    if (rd_kafka_conf_set(conf, "bootstrap.servers", argv[1], err, sizeof err)) {
        fprintf(stderr, "rdkperf: %s\n", err);
        return 2;
    }
    for (int i = 6; i < argc; i++) {
        char *eq = strchr(argv[i], '=');
        if (!eq) {
            fprintf(stderr, "rdkperf: expected key=value, got %s\n", argv[i]);
            return 2;
        }
        *eq = '\0';
        if (rd_kafka_conf_set(conf, argv[i], eq + 1, err, sizeof err)) {
            fprintf(stderr, "rdkperf: %s\n", err);
            return 2;
        }
    }
    rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!rk) {
        fprintf(stderr, "rdkperf: %s\n", err);
        return 2;
    }
    rd_kafka_topic_t *topic = rd_kafka_topic_new(rk, argv[2], NULL);
    char *payload = calloc(1, size ? size : 1);
    memset(payload, 'm', size);

    double t0 = now();
    for (long i = 0; i < count; i++) {
        /* flags 0: the payload is neither copied nor freed by librdkafka */
        while (rd_kafka_produce(topic, (int32_t)(i % partitions), 0, payload, size, NULL, 0,
                                NULL) == -1) {
            if (rd_kafka_last_error() != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
                fprintf(stderr, "rdkperf: produce: %s\n", rd_kafka_err2str(rd_kafka_last_error()));
                return 1;
            }
            rd_kafka_poll(rk, 1);
        }
        if ((i & 1023) == 0)
            rd_kafka_poll(rk, 0);
    }
    while (rd_kafka_outq_len(rk) > 0 && now() - t0 < 600)
        rd_kafka_poll(rk, 10);
    double seconds = now() - t0;
    printf("{\"records\": %ld, \"bytes\": %ld, \"seconds\": %.6f, \"failed\": %ld}\n", delivered,
           delivered * (long)size, seconds, failed);
    rd_kafka_topic_destroy(topic);
    rd_kafka_destroy(rk);
    free(payload);
    return failed || delivered != count ? 1 : 0;
}
