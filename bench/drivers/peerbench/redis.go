package main

// Redis Streams: XADD to the key -name, pipelined with at most -window replies
// outstanding (one goroutine sends, one reads the replies, as redigo allows), read back
// with XRANGE in pages of 1000 entries (the end-to-end consumer blocks in XREAD).
// With -wait N (a primary with replicas), a WAIT N 0 follows every -waitevery XADDs and
// the last one: those records are acknowledged once N replicas confirmed them (WAIT with
// timeout 0 blocks until they do, and holds back the connection's later commands); e2e
// then times each record's acknowledgement at that WAIT's reply.

import (
	"time"

	"github.com/gomodule/redigo/redis"
)

const redisPage = 1000

func redisDial(o options) redis.Conn {
	c, err := redis.Dial("tcp", o.addr, redis.DialConnectTimeout(30*time.Second))
	if err != nil {
		fail("connect: %v", err)
	}
	return c
}

// redisPipeline sends n XADDs, value(i, due) giving each record, with a bounded window
// of unanswered commands; onReply (optional) sees the index of each record as it is
// acknowledged: at its XADD's reply, or with -wait at the reply of the WAIT after it.
func redisPipeline(o options, c redis.Conn, n int, next func(send func([]byte)), onReply func(int)) {
	window := make(chan struct{}, o.window)
	done := make(chan struct{})
	go func() {
		unacked := 0 // first record whose WAIT has not answered yet
		for i := 0; i < n; i++ {
			if _, err := c.Receive(); err != nil {
				fail("xadd: %v", err)
			}
			<-window
			if onReply != nil && o.wait == 0 {
				onReply(i)
			}
			if o.wait > 0 && ((i+1)%o.waitEvery == 0 || i == n-1) {
				redisWaited(o, c)
				for ; onReply != nil && unacked <= i; unacked++ {
					onReply(unacked)
				}
			}
		}
		close(done)
	}()
	sent := 0
	next(func(v []byte) {
		window <- struct{}{}
		if err := c.Send("XADD", o.name, "*", "d", v); err != nil {
			fail("xadd: %v", err)
		}
		sent++
		if o.wait > 0 && (sent%o.waitEvery == 0 || sent == n) {
			// the XADDs before it count as acknowledged when WAIT answers
			if err := c.Send("WAIT", o.wait, 0); err != nil {
				fail("wait: %v", err)
			}
		}
		// Flush when the window is full or every 64 commands, like a pipelining client.
		if len(window) == cap(window) || sent%64 == 0 {
			if err := c.Flush(); err != nil {
				fail("flush: %v", err)
			}
		}
	})
	if err := c.Flush(); err != nil {
		fail("flush: %v", err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Minute):
		fail("xadd replies timed out")
	}
}

// redisWaited reads one WAIT reply: the replicas that hold every write sent before it.
func redisWaited(o options, c redis.Conn) {
	acked, err := redis.Int(c.Receive())
	if err != nil {
		fail("wait: %v", err)
	}
	if acked < o.wait {
		fail("wait: %d of %d replicas", acked, o.wait)
	}
}

func redisProduce(o options) result {
	c := redisDial(o)
	defer c.Close()
	value := make([]byte, o.size)
	t0 := time.Now()
	redisPipeline(o, c, o.count, func(send func([]byte)) {
		for i := 0; i < o.count; i++ {
			send(value)
		}
	}, nil)
	s := time.Since(t0).Seconds()
	return result{Records: int64(o.count), Bytes: int64(o.count * o.size), Seconds: s}
}

// redisEntries decodes an XRANGE/XREAD entry list into (last id, values).
func redisEntries(reply any, onRecord func([]byte)) (string, int) {
	entries, _ := reply.([]any)
	last := ""
	for _, e := range entries {
		pair := e.([]any)
		last = string(pair[0].([]byte))
		fields := pair[1].([]any)
		if onRecord != nil {
			onRecord(fields[1].([]byte))
		}
	}
	return last, len(entries)
}

func redisConsume(o options) result {
	c := redisDial(o)
	defer c.Close()
	start := "-"
	var n int64
	t0 := time.Now()
	for n < int64(o.count) {
		reply, err := c.Do("XRANGE", o.name, start, "+", "COUNT", redisPage)
		if err != nil {
			fail("xrange: %v", err)
		}
		last, k := redisEntries(reply, nil)
		if k == 0 {
			fail("stream ended after %d of %d records", n, o.count)
		}
		n += int64(k)
		start = "(" + last
	}
	s := time.Since(t0).Seconds()
	return result{Records: n, Bytes: n * int64(o.size), Seconds: s}
}

func redisE2E(o options) result {
	total := int(o.rate * o.seconds)
	got := newCounter(total)
	var ack, e2e recorder
	go func() {
		c := redisDial(o)
		defer c.Close()
		last := "$"
		for got.n.Load() < int64(total) {
			reply, err := c.Do("XREAD", "COUNT", redisPage, "BLOCK", 1000, "STREAMS", o.name, last)
			if err != nil {
				fail("xread: %v", err)
			}
			if reply == nil {
				continue
			}
			stream := reply.([]any)[0].([]any)
			id, k := redisEntries(stream[1], func(v []byte) { e2e.add(time.Since(epoch) - dueOf(v)) })
			last = id
			got.add(int64(k))
		}
	}()
	time.Sleep(200 * time.Millisecond) // the XREAD is blocking before the first XADD
	c := redisDial(o)
	defer c.Close()
	dues := make([]time.Duration, total)
	value := make([]byte, o.size)
	t0 := time.Now()
	redisPipeline(o, c, total, func(send func([]byte)) {
		pace(o, func(i int, due time.Duration) {
			dues[i] = due
			send(stamp(value, due))
		})
	}, func(i int) { ack.add(time.Since(epoch) - dues[i]) })
	got.wait(2 * time.Minute)
	return result{Records: int64(total), Bytes: int64(total * o.size), Seconds: time.Since(t0).Seconds(),
		Ack: ack.summary(), E2E: e2e.summary(), Offered: o.rate}
}
