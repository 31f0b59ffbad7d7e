package main

// NATS JetStream: a file-storage stream named -name on subject <name>.data (-replicas
// copies on a cluster: a publish is acknowledged once a majority stored it), written with
// asynchronous publishes (each acknowledged by the server once stored), read by an
// ordered push consumer (the ephemeral, flow-controlled consumer `nats bench` uses).

import (
	"time"

	"github.com/nats-io/nats.go"
)

// stall: how long PublishAsync waits for room in a full window of unacknowledged
// publishes before it gives up; nats.go's 200 ms default fails runs on a busy machine
// (seen with a 3-node cluster at load 15), where a slow acknowledgement is no error.
var stall = nats.StallWait(time.Minute)

func natsConnect(o options) (*nats.Conn, nats.JetStreamContext) {
	nc, err := nats.Connect("nats://"+o.addr, nats.Timeout(30*time.Second))
	if err != nil {
		fail("connect: %v", err)
	}
	js, err := nc.JetStream(nats.PublishAsyncMaxPending(o.window),
		nats.PublishAsyncErrHandler(func(_ nats.JetStream, _ *nats.Msg, err error) {
			fail("publish: %v", err)
		}))
	if err != nil {
		fail("jetstream: %v", err)
	}
	// The stream exists after the first run; AddStream with the same config is a no-op.
	_, err = js.AddStream(&nats.StreamConfig{Name: o.name, Subjects: []string{o.name + ".data"},
		Storage: nats.FileStorage, Replicas: o.replicas})
	if err != nil {
		fail("add stream: %v", err)
	}
	return nc, js
}

func natsProduce(o options) result {
	nc, js := natsConnect(o)
	defer nc.Close()
	value := make([]byte, o.size)
	subject := o.name + ".data"
	t0 := time.Now()
	for i := 0; i < o.count; i++ {
		if _, err := js.PublishAsync(subject, value, stall); err != nil {
			fail("publish: %v", err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(10 * time.Minute):
		fail("publish acks timed out")
	}
	s := time.Since(t0).Seconds()
	return result{Records: int64(o.count), Bytes: int64(o.count * o.size), Seconds: s}
}

func natsSubscribe(o options, js nats.JetStreamContext, got *counter, deliver nats.SubOpt,
	onRecord func([]byte)) *nats.Subscription {
	sub, err := js.Subscribe(o.name+".data", func(m *nats.Msg) {
		if onRecord != nil {
			onRecord(m.Data)
		}
		got.add(1)
	}, nats.OrderedConsumer(), deliver)
	if err != nil {
		fail("subscribe: %v", err)
	}
	_ = sub.SetPendingLimits(-1, -1)
	return sub
}

func natsConsume(o options) result {
	nc, js := natsConnect(o)
	defer nc.Close()
	got := newCounter(o.count)
	t0 := time.Now()
	sub := natsSubscribe(o, js, got, nats.DeliverAll(), nil)
	got.wait(10 * time.Minute)
	s := time.Since(t0).Seconds()
	_ = sub.Unsubscribe()
	n := got.n.Load()
	return result{Records: n, Bytes: n * int64(o.size), Seconds: s}
}

type pending struct {
	due    time.Duration
	future nats.PubAckFuture
}

func natsE2E(o options) result {
	nc, js := natsConnect(o)
	defer nc.Close()
	total := int(o.rate * o.seconds)
	got := newCounter(total)
	var ack, e2e recorder
	sub := natsSubscribe(o, js, got, nats.DeliverNew(), func(v []byte) {
		e2e.add(time.Since(epoch) - dueOf(v))
	})
	defer func() { _ = sub.Unsubscribe() }()
	futures := make(chan pending, 1<<20)
	acked := newCounter(total)
	go func() { // acknowledgements come back in publish order
		for p := range futures {
			select {
			case <-p.future.Ok():
				ack.add(time.Since(epoch) - p.due)
				acked.add(1)
			case err := <-p.future.Err():
				fail("publish: %v", err)
			}
		}
	}()
	value := make([]byte, o.size)
	subject := o.name + ".data"
	t0 := time.Now()
	pace(o, func(_ int, due time.Duration) {
		f, err := js.PublishAsync(subject, stamp(value, due), stall)
		if err != nil {
			fail("publish: %v", err)
		}
		futures <- pending{due, f}
	})
	acked.wait(2 * time.Minute)
	got.wait(2 * time.Minute)
	return result{Records: int64(total), Bytes: int64(total * o.size), Seconds: time.Since(t0).Seconds(),
		Ack: ack.summary(), E2E: e2e.summary(), Offered: o.rate}
}
