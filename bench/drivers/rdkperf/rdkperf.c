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
 *
 * Transactional produce (bench/transactions.py): with transactional.id=ID among the
 * settings, two more settings of the driver's own (not librdkafka's) apply:
 * txn.commit.ms=MS (default 100) ends a transaction once it is MS old, and
 * txn.abort.every=N aborts every Nth transaction instead of committing it (0, the
 * default: none); the last transaction is always committed. A transaction ends with
 * rd_kafka_flush (what commit_transaction does first; an aborted transaction's records
 * thus reach the log too), then commit_transaction or abort_transaction. The output then
 * adds "transactions", "aborted", "aborted_records", and where the producer's time went:
 * "end_seconds" (the ends: flush and commit or abort), "flush_seconds" (their flushes),
 * "first_ack_seconds" (from each begin_transaction to the transaction's first delivery
 * report: AddPartitionsToTxn and the first produce round trip).
 *
 * warmup=1 (the driver's own) delivers one record to each partition before the clock
 * starts (in a committed transaction when transactional), so that connections, metadata,
 * the producer id and the first AddPartitionsToTxn are not timed; those records are not
 * counted in the output.
 */
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long delivered, failed;

/* The transactional mode's state: zero when transactional.id is not set. */
static struct txn {
    int on;
    double commit_s;  /* end a transaction this old */
    long abort_every; /* abort every Nth transaction, 0: never */
    long started, aborted, aborted_records, records_in_txn;
    double began, end_seconds, flush_seconds, first_ack_seconds;
    int awaiting_first; /* no delivery report yet in the current transaction */
} txn = {0, 0.1, 0, 0, 0, 0, 0, 0.0, 0.0, 0.0, 0.0, 0};

static double now(void);

static int txn_check(rd_kafka_error_t *error, const char *what) {
    if (!error)
        return 0;
    fprintf(stderr, "rdkperf: %s: %s\n", what, rd_kafka_error_string(error));
    rd_kafka_error_destroy(error);
    return 1;
}

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
    (void)rk;
    (void)opaque;
    if (m->err) {
        if (failed++ == 0)
            fprintf(stderr, "rdkperf: delivery failed: %s\n", rd_kafka_err2str(m->err));
    } else {
        delivered++;
    }
    if (txn.awaiting_first) {
        txn.first_ack_seconds += now() - txn.began;
        txn.awaiting_first = 0;
    }
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Ends the current transaction (abort when it is the Nth and not the last), then,
 * unless last, begins the next. Returns non-zero on failure. */
static int txn_end(rd_kafka_t *rk, int last) {
    double t0 = now();
    int abort = !last && txn.abort_every > 0 && txn.started % txn.abort_every == 0;
    if (rd_kafka_flush(rk, 60000) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        fprintf(stderr, "rdkperf: flush timed out\n");
        return 1;
    }
    txn.flush_seconds += now() - t0;
    if (abort) {
        if (txn_check(rd_kafka_abort_transaction(rk, 60000), "abort_transaction"))
            return 1;
        txn.aborted++;
        txn.aborted_records += txn.records_in_txn;
    } else if (txn_check(rd_kafka_commit_transaction(rk, 60000), "commit_transaction")) {
        return 1;
    }
    txn.end_seconds += now() - t0;
    txn.records_in_txn = 0;
    if (last)
        return 0;
    if (txn_check(rd_kafka_begin_transaction(rk), "begin_transaction"))
        return 1;
    txn.started++;
    txn.began = now();
    txn.awaiting_first = 1;
    return 0;
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
    int warmup = 0;
    for (int i = 6; i < argc; i++) {
        char *eq = strchr(argv[i], '=');
        if (!eq) {
            fprintf(stderr, "rdkperf: expected key=value, got %s\n", argv[i]);
            return 2;
        }
        *eq = '\0';
        if (strcmp(argv[i], "txn.commit.ms") == 0) {
            txn.commit_s = atof(eq + 1) / 1000;
            continue;
        }
        if (strcmp(argv[i], "warmup") == 0) {
            warmup = atoi(eq + 1);
            continue;
        }
        if (strcmp(argv[i], "txn.abort.every") == 0) {
            txn.abort_every = atol(eq + 1);
            continue;
        }
        if (strcmp(argv[i], "transactional.id") == 0)
            txn.on = 1;
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
    /* InitProducerId before the clock starts, as the idempotent producer's happens on
     * its own before its first batch can go */
    if (txn.on && txn_check(rd_kafka_init_transactions(rk, 60000), "init_transactions"))
        return 1;
    if (warmup) {
        if (txn.on && txn_check(rd_kafka_begin_transaction(rk), "begin_transaction"))
            return 1;
        for (int p = 0; p < partitions; p++) {
            if (rd_kafka_produce(topic, p, 0, payload, size, NULL, 0, NULL) == -1) {
                fprintf(stderr, "rdkperf: warm-up produce: %s\n",
                        rd_kafka_err2str(rd_kafka_last_error()));
                return 1;
            }
        }
        if (txn.on ? txn_check(rd_kafka_commit_transaction(rk, 60000), "commit_transaction")
                   : rd_kafka_flush(rk, 60000) != RD_KAFKA_RESP_ERR_NO_ERROR)
            return 1;
        rd_kafka_poll(rk, 0);
        if (failed || delivered != partitions) {
            fprintf(stderr, "rdkperf: warm-up: %ld of %d delivered\n", delivered, partitions);
            return 1;
        }
        delivered = 0;
    }

    double t0 = now();
    if (txn.on) {
        if (txn_check(rd_kafka_begin_transaction(rk), "begin_transaction"))
            return 1;
        txn.started = 1;
        txn.began = t0;
        txn.awaiting_first = 1;
    }
    for (long i = 0; i < count; i++) {
        if (txn.on && (i & 255) == 0 && now() - txn.began >= txn.commit_s &&
            txn_end(rk, 0))
            return 1;
        /* flags 0: the payload is neither copied nor freed by librdkafka */
        while (rd_kafka_produce(topic, (int32_t)(i % partitions), 0, payload, size, NULL, 0,
                                NULL) == -1) {
            if (rd_kafka_last_error() != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
                fprintf(stderr, "rdkperf: produce: %s\n", rd_kafka_err2str(rd_kafka_last_error()));
                return 1;
            }
            rd_kafka_poll(rk, 1);
        }
        txn.records_in_txn++;
        if ((i & 1023) == 0)
            rd_kafka_poll(rk, 0);
    }
    if (txn.on && txn_end(rk, 1))
        return 1;
    while (rd_kafka_outq_len(rk) > 0 && now() - t0 < 600)
        rd_kafka_poll(rk, 10);
    double seconds = now() - t0;
    printf("{\"records\": %ld, \"bytes\": %ld, \"seconds\": %.6f, \"failed\": %ld", delivered,
           delivered * (long)size, seconds, failed);
    if (txn.on)
        printf(", \"transactions\": %ld, \"aborted\": %ld, \"aborted_records\": %ld, "
               "\"end_seconds\": %.6f, \"flush_seconds\": %.6f, "
               "\"first_ack_seconds\": %.6f",
               txn.started, txn.aborted, txn.aborted_records, txn.end_seconds,
               txn.flush_seconds, txn.first_ack_seconds);
    printf("}\n");
    rd_kafka_topic_destroy(topic);
    rd_kafka_destroy(rk);
    free(payload);
    return failed || delivered != count ? 1 : 0;
}
