/* rdkperf -e2e: latency at a fixed offered rate through librdkafka (see rdkperf.c).
 *
 * Every record carries the time it was due (CLOCK_MONOTONIC ns, first 8 bytes). The
 * sender keeps to the schedule however late it is, so latencies count from the due time
 * (coordinated omission corrected): ack = due -> delivery report, e2e = due -> the
 * consumer thread's receipt. A marker record is sent and received first, so the
 * consumer's connection and first fetch are not measured.
 */
#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static double *acks, *e2es;
static long n_acks, n_e2e, total;
static volatile int marker_seen, stop;

static int64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t due_of(const void *payload, size_t len) {
    int64_t due = 0;
    if (len >= sizeof due)
        memcpy(&due, payload, sizeof due);
    return due;
}

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
    (void)rk;
    (void)opaque;
    if (m->err) {
        fprintf(stderr, "rdkperf: delivery failed: %s\n", rd_kafka_err2str(m->err));
        exit(1);
    }
    int64_t due = due_of(m->payload, m->len);
    if (due > 0 && n_acks < total)
        acks[n_acks++] = (mono_ns() - due) / 1e6;
}

static void *consume(void *arg) {
    rd_kafka_t *rk = arg;
    while (!stop) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
        if (!m)
            continue;
        if (!m->err) {
            int64_t due = due_of(m->payload, m->len);
            if (due == 0)
                marker_seen = 1;
            else if (n_e2e < total)
                e2es[n_e2e++] = (mono_ns() - due) / 1e6;
        }
        rd_kafka_message_destroy(m);
    }
    return NULL;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void print_quantiles(const char *name, double *v, long n) {
    qsort(v, (size_t)n, sizeof *v, cmp);
#define AT(q) (n ? v[(long)((q) * n) < n ? (long)((q) * n) : n - 1] : 0.0)
    printf("\"%s\": {\"p50\": %.4f, \"p99\": %.4f, \"p999\": %.4f, \"max\": %.4f, \"count\": %ld}",
           name, AT(0.5), AT(0.99), AT(0.999), n ? v[n - 1] : 0.0, n);
#undef AT
}

static rd_kafka_t *client(rd_kafka_type_t type, const char *brokers, int argc, char **argv,
                          int first_extra) {
    char err[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "bootstrap.servers", brokers, err, sizeof err);
    if (type == RD_KAFKA_PRODUCER) {
        rd_kafka_conf_set(conf, "linger.ms", "1", err, sizeof err);
        for (int i = first_extra; i < argc; i++) {
            char key[256];
            const char *eq = strchr(argv[i], '=');
            if (!eq || (size_t)(eq - argv[i]) >= sizeof key)
                continue;
            memcpy(key, argv[i], (size_t)(eq - argv[i]));
            key[eq - argv[i]] = '\0';
            if (rd_kafka_conf_set(conf, key, eq + 1, err, sizeof err)) {
                fprintf(stderr, "rdkperf: %s\n", err);
                exit(2);
            }
        }
        rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
    } else {
        rd_kafka_conf_set(conf, "group.id", "rdkperf-e2e", err, sizeof err);
        rd_kafka_conf_set(conf, "enable.auto.commit", "false", err, sizeof err);
        rd_kafka_conf_set(conf, "fetch.wait.max.ms", "10", err, sizeof err);
    }
    rd_kafka_t *rk = rd_kafka_new(type, conf, err, sizeof err);
    if (!rk) {
        fprintf(stderr, "rdkperf: %s\n", err);
        exit(2);
    }
    return rk;
}

int e2e_main(int argc, char **argv) {
    if (argc < 6) {
        fprintf(stderr, "usage: rdkperf -e2e BROKERS TOPIC RATE SECONDS SIZE [key=value ...]\n");
        return 2;
    }
    const char *brokers = argv[1], *topic_name = argv[2];
    double rate = atof(argv[3]), seconds = atof(argv[4]);
    size_t size = (size_t)atol(argv[5]);
    if (size < 8)
        size = 8;
    total = (long)(rate * seconds);
    acks = calloc((size_t)total + 1, sizeof *acks);
    e2es = calloc((size_t)total + 1, sizeof *e2es);

    rd_kafka_t *consumer = client(RD_KAFKA_CONSUMER, brokers, argc, argv, 6);
    rd_kafka_topic_partition_list_t *parts = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(parts, topic_name, 0)->offset = RD_KAFKA_OFFSET_BEGINNING;
    rd_kafka_assign(consumer, parts);
    rd_kafka_topic_partition_list_destroy(parts);
    pthread_t thread;
    pthread_create(&thread, NULL, consume, consumer);

    rd_kafka_t *producer = client(RD_KAFKA_PRODUCER, brokers, argc, argv, 6);
    rd_kafka_topic_t *topic = rd_kafka_topic_new(producer, topic_name, NULL);
    char *payload = calloc(1, size);
    memset(payload + 8, 'm', size - 8);
    /* the marker (due 0) */
    rd_kafka_produce(topic, 0, RD_KAFKA_MSG_F_COPY, payload, size, NULL, 0, NULL);
    rd_kafka_flush(producer, 30000);
    for (int64_t deadline = mono_ns() + 60000000000LL; !marker_seen && mono_ns() < deadline;)
        rd_kafka_poll(producer, 10);
    if (!marker_seen) {
        fprintf(stderr, "rdkperf: the consumer did not see the marker within 60 s\n");
        return 1;
    }

    struct rusage ru0, ru1;
    getrusage(RUSAGE_SELF, &ru0);
    int64_t start = mono_ns(), interval = (int64_t)(1e9 / rate);
    for (long i = 0; i < total;) {
        int64_t now = mono_ns();
        for (; i < total && start + i * interval <= now; i++) {
            int64_t due = start + i * interval;
            memcpy(payload, &due, sizeof due);
            while (rd_kafka_produce(topic, 0, RD_KAFKA_MSG_F_COPY, payload, size, NULL, 0,
                                    NULL) == -1)
                rd_kafka_poll(producer, 1);
        }
        rd_kafka_poll(producer, 0);
        struct timespec pause = {0, 100000};
        nanosleep(&pause, NULL);
    }
    rd_kafka_flush(producer, 120000);
    for (int64_t deadline = mono_ns() + 120000000000LL; n_e2e < total && mono_ns() < deadline;) {
        struct timespec pause = {0, 1000000};
        nanosleep(&pause, NULL);
    }
    double wall = (mono_ns() - start) / 1e9;
    getrusage(RUSAGE_SELF, &ru1);
    double cpu = (ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec) +
                 (ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec) / 1e6 +
                 (ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec) +
                 (ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec) / 1e6;
    stop = 1;
    pthread_join(thread, NULL);
    printf("{\"records\": %ld, \"bytes\": %ld, \"seconds\": %.6f, \"client_cpu\": %.4f, ",
           total, total * (long)size, wall, cpu / wall);
    print_quantiles("ack_ms", acks, n_acks);
    printf(", ");
    print_quantiles("e2e_ms", e2es, n_e2e);
    printf(", \"offered_records_s\": %.1f}\n", rate);
    rd_kafka_consumer_close(consumer);
    rd_kafka_destroy(consumer);
    rd_kafka_topic_destroy(topic);
    rd_kafka_destroy(producer);
    return n_e2e < total ? 1 : 0;
}
