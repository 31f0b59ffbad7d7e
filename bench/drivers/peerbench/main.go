// peerbench: the native load driver for NATS JetStream (nats.go) and Redis Streams
// (redigo) in the peer comparison of bench/peers.py; Moldau's is bench/drivers/rdkperf
// (C, librdkafka), a driver of the same class.
//
// Built offline by bench/_drivers.py from Debian's golang-go and golang-github-* packages
// (GOPATH mode, GO111MODULE=off). Prints one JSON object on stdout.
//
//	peerbench -system nats|redis -mode produce|consume|e2e -addr HOST:PORT -name T ...
//
// produce: send -count records of -size bytes as fast as acknowledgements allow.
// consume: read -count records from the beginning of a full topic/stream.
// e2e: send at a fixed -rate (records/s) for -seconds while a consumer in the same process
// reads them. Each record carries the time it was due; latency counts from then, so a
// stalled sender does not hide the wait (coordinated omission corrected). Both the
// publish-to-ack and the due-to-receive latency are reported.
package main

import (
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

type options struct {
	system, mode, addr, name string
	size, count, window      int
	replicas                 int // nats: the stream's replicas
	wait, waitEvery          int // redis: WAIT for this many replicas after every waitEvery XADDs
	rate, seconds            float64
}

type result struct {
	Records   int64     `json:"records"`
	Bytes     int64     `json:"bytes"`
	Seconds   float64   `json:"seconds"`
	ClientCPU float64   `json:"client_cpu"` // CPU seconds of this process / wall seconds
	Ack       *quantile `json:"ack_ms,omitempty"`
	E2E       *quantile `json:"e2e_ms,omitempty"`
	Offered   float64   `json:"offered_records_s,omitempty"`
}

type quantile struct {
	P50   float64 `json:"p50"`
	P99   float64 `json:"p99"`
	P999  float64 `json:"p999"`
	Max   float64 `json:"max"`
	Count int     `json:"count"`
}

// recorder collects latencies from several goroutines.
type recorder struct {
	mu      sync.Mutex
	samples []float64
}

func (r *recorder) add(d time.Duration) {
	r.mu.Lock()
	r.samples = append(r.samples, float64(d.Nanoseconds())/1e6)
	r.mu.Unlock()
}

func (r *recorder) summary() *quantile {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.samples
	if len(s) == 0 {
		return nil
	}
	sort.Float64s(s)
	at := func(q float64) float64 {
		i := int(q * float64(len(s)))
		if i >= len(s) {
			i = len(s) - 1
		}
		return s[i]
	}
	return &quantile{at(0.5), at(0.99), at(0.999), s[len(s)-1], len(s)}
}

var epoch = time.Now()

// payload returns a record of the given size whose first 8 bytes hold `due`, the
// nanoseconds since epoch at which it was scheduled to be sent.
func stamp(buf []byte, due time.Duration) []byte {
	out := make([]byte, len(buf))
	copy(out, buf)
	binary.LittleEndian.PutUint64(out, uint64(due))
	return out
}

func dueOf(value []byte) time.Duration {
	if len(value) < 8 {
		return 0
	}
	return time.Duration(binary.LittleEndian.Uint64(value))
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

// pace calls send(i, due) for every record due by now, at `rate` records/s for `seconds`.
func pace(o options, send func(i int, due time.Duration)) int {
	start := time.Since(epoch)
	interval := time.Duration(float64(time.Second) / o.rate)
	total := int(o.rate * o.seconds)
	i := 0
	for i < total {
		now := time.Since(epoch)
		for i < total && start+time.Duration(i)*interval <= now {
			send(i, start+time.Duration(i)*interval)
			i++
		}
		time.Sleep(100 * time.Microsecond)
	}
	return total
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "peerbench: "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	var o options
	flag.StringVar(&o.system, "system", "nats", "nats or redis")
	flag.StringVar(&o.mode, "mode", "produce", "produce, consume or e2e")
	flag.StringVar(&o.addr, "addr", "127.0.0.1:4222", "server address")
	flag.StringVar(&o.name, "name", "bench", "stream or key")
	flag.IntVar(&o.size, "size", 1024, "record size in bytes")
	flag.IntVar(&o.count, "count", 100000, "records to produce or consume")
	flag.IntVar(&o.window, "window", 4096, "unacknowledged records in flight")
	flag.IntVar(&o.replicas, "replicas", 1, "nats: replicas of the stream (a cluster for >1)")
	flag.IntVar(&o.wait, "wait", 0, "redis produce: replicas WAIT asks for (0: no WAIT)")
	flag.IntVar(&o.waitEvery, "waitevery", 1024, "redis produce: XADDs between WAITs")
	flag.Float64Var(&o.rate, "rate", 10000, "e2e: offered records/s")
	flag.Float64Var(&o.seconds, "seconds", 10, "e2e: duration")
	flag.Parse()

	cpu0, t0 := cpuSeconds(), time.Now()
	modes := map[string]func(options) result{
		"nats/produce": natsProduce, "nats/consume": natsConsume, "nats/e2e": natsE2E,
		"redis/produce": redisProduce, "redis/consume": redisConsume, "redis/e2e": redisE2E,
	}
	fn, ok := modes[o.system+"/"+o.mode]
	if !ok {
		fail("unknown system/mode %s/%s", o.system, o.mode)
	}
	r := fn(o)
	if r.Seconds == 0 {
		r.Seconds = time.Since(t0).Seconds()
	}
	r.ClientCPU = (cpuSeconds() - cpu0) / time.Since(t0).Seconds()
	_ = json.NewEncoder(os.Stdout).Encode(r)
}

// counter counts received records and closes done when it reaches target.
type counter struct {
	n      atomic.Int64
	target int64
	once   sync.Once
	done   chan struct{}
}

func newCounter(target int) *counter {
	return &counter{target: int64(target), done: make(chan struct{})}
}

func (c *counter) add(k int64) {
	if c.n.Add(k) >= c.target {
		c.once.Do(func() { close(c.done) })
	}
}

func (c *counter) wait(timeout time.Duration) {
	select {
	case <-c.done:
	case <-time.After(timeout):
		fail("timed out with %d of %d records", c.n.Load(), c.target)
	}
}
