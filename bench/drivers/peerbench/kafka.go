package main

// Moldau through librdkafka (confluent-kafka-go links Debian's librdkafka).

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/confluentinc/confluent-kafka-go/kafka"
)

func kafkaProducer(o options, linger int) *kafka.Producer {
	p, err := kafka.NewProducer(&kafka.ConfigMap{
		"bootstrap.servers":            o.addr,
		"acks":                         o.acks,
		"linger.ms":                    linger,
		"batch.size":                   1 << 20,
		"compression.type":             o.compression,
		"queue.buffering.max.kbytes":   1 << 20,
		"queue.buffering.max.messages": 2000000,
	})
	if err != nil {
		fail("producer: %v", err)
	}
	return p
}

// kafkaSend produces one record, waiting while librdkafka's queue is full.
func kafkaSend(p *kafka.Producer, msg *kafka.Message) {
	for {
		err := p.Produce(msg, nil)
		if err == nil {
			return
		}
		if e, ok := err.(kafka.Error); ok && e.Code() == kafka.ErrQueueFull {
			time.Sleep(time.Millisecond)
			continue
		}
		fail("produce: %v", err)
	}
}

// kafkaReports counts delivery reports; onAck (optional) sees each acknowledged record.
func kafkaReports(p *kafka.Producer, c *counter, onAck func(*kafka.Message)) {
	for ev := range p.Events() {
		if m, ok := ev.(*kafka.Message); ok {
			if m.TopicPartition.Error != nil {
				fail("delivery: %v", m.TopicPartition.Error)
			}
			if onAck != nil {
				onAck(m)
			}
			c.add(1)
		}
	}
}

func kafkaProduce(o options) result {
	p := kafkaProducer(o, o.linger)
	defer p.Close()
	acked := newCounter(o.count)
	go kafkaReports(p, acked, nil)
	value := make([]byte, o.size)
	t0 := time.Now()
	for i := 0; i < o.count; i++ {
		tp := kafka.TopicPartition{Topic: &o.name, Partition: int32(i % o.partitions)}
		kafkaSend(p, &kafka.Message{TopicPartition: tp, Value: value})
	}
	acked.wait(10 * time.Minute)
	s := time.Since(t0).Seconds()
	return result{Records: int64(o.count), Bytes: int64(o.count * o.size), Seconds: s}
}

func kafkaConsumer(o options, offset kafka.Offset) *kafka.Consumer {
	c, err := kafka.NewConsumer(&kafka.ConfigMap{
		"bootstrap.servers":          o.addr,
		"group.id":                   "peerbench",
		"enable.auto.commit":         false,
		"fetch.max.bytes":            52428800,
		"max.partition.fetch.bytes":  10485760,
		"queued.max.messages.kbytes": 1 << 20,
		"fetch.wait.max.ms":          10,
	})
	if err != nil {
		fail("consumer: %v", err)
	}
	var parts []kafka.TopicPartition
	for i := 0; i < o.partitions; i++ {
		parts = append(parts, kafka.TopicPartition{Topic: &o.name, Partition: int32(i), Offset: offset})
	}
	if err := c.Assign(parts); err != nil {
		fail("assign: %v", err)
	}
	return c
}

// kafkaPoll reads until target records arrived, calling onRecord (optional) for each.
func kafkaPoll(c *kafka.Consumer, got *counter, onRecord func([]byte)) {
	for {
		select {
		case <-got.done:
			return
		default:
		}
		switch ev := c.Poll(100).(type) {
		case *kafka.Message:
			if onRecord != nil {
				onRecord(ev.Value)
			}
			got.add(1)
		case kafka.Error:
			fmt.Fprintf(os.Stderr, "peerbench: consumer: %v\n", ev)
		}
	}
}

func kafkaConsume(o options) result {
	c := kafkaConsumer(o, kafka.OffsetBeginning)
	defer c.Close()
	got := newCounter(o.count)
	t0 := time.Now()
	kafkaPoll(c, got, nil)
	s := time.Since(t0).Seconds()
	n := got.n.Load()
	return result{Records: n, Bytes: n * int64(o.size), Seconds: s}
}

func kafkaE2E(o options) result {
	c := kafkaConsumer(o, kafka.OffsetEnd)
	defer c.Close()
	// Wait until the consumer has its fetch positions (offset END resolved) before sending.
	for i := 0; i < 50; i++ {
		c.Poll(100)
	}
	p := kafkaProducer(o, 1)
	defer p.Close()
	total := int(o.rate * o.seconds)
	acked, got := newCounter(total), newCounter(total)
	var ack, e2e recorder
	go kafkaReports(p, acked, func(m *kafka.Message) {
		due, _ := strconv.ParseInt(string(m.Key), 10, 64)
		ack.add(time.Since(epoch) - time.Duration(due))
	})
	go kafkaPoll(c, got, func(v []byte) { e2e.add(time.Since(epoch) - dueOf(v)) })
	value := make([]byte, o.size)
	t0 := time.Now()
	pace(o, func(i int, due time.Duration) {
		tp := kafka.TopicPartition{Topic: &o.name, Partition: int32(i % o.partitions)}
		key := []byte(fmt.Sprint(int64(due)))
		kafkaSend(p, &kafka.Message{TopicPartition: tp, Key: key, Value: stamp(value, due)})
	})
	acked.wait(2 * time.Minute)
	got.wait(2 * time.Minute)
	return result{Records: int64(total), Bytes: int64(total * o.size), Seconds: time.Since(t0).Seconds(),
		Ack: ack.summary(), E2E: e2e.summary(), Offered: o.rate}
}
