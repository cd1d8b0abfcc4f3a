package main

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// brokerJVM are the JVM flags Kafka's own start scripts give a broker
// (kafka-server-start.sh: a 1 GB heap; kafka-run-class.sh: G1 with these
// settings). The benchmark's broker runs with them, as a broker started
// from a Kafka distribution would, instead of kafkatest's smaller test heap.
var brokerJVM = []string{"-Xms1g", "-Xmx1g", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
	"-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent"}

// latencyBrokerJVM is added to brokerJVM in the latency scenario: a young
// generation of 512 MB. With Kafka's flags G1 aims at 20 ms pauses, which
// on the one CPU --pin-cpus leaves the broker (with the relay, the
// registry and the benchmark) it cannot meet, so it shrinks the young
// generation to its floor (5 % of the heap, about 50 MB): under
// exactly-once at 5k/s the broker then collected every 1.0–1.5 s, pausing
// 20–50 ms each time, and every commit, acknowledgement and marker waits
// behind a pause (docs/BENCHMARKS.md, "The broker's young collections").
// With 512 MB it collects every 8–10 s, as a broker with cores of its own
// for G1's threads would keep its young generation. The pauses that
// overlap each window are reported beside its figures either way.
var latencyBrokerJVM = []string{"-Xmn512m"}

// warmBroker produces mb megabytes of records of about payloadBytes each
// into a topic of its own, once uncompressed and once with lz4, so that the
// broker's JVM has compiled its produce path before anything is measured: a
// broker that serves traffic has, and without this the first drain paid
// for the JIT compiler (it took 30-40 % of the broker's CPU in run 1).
func warmBroker(ctx context.Context, broker string, payloadBytes, mb int) error {
	if mb <= 0 {
		return nil
	}
	value := bytes.Repeat([]byte(`{"sku":"SKU-000042","quantity":3,"price":"19.99"},`), payloadBytes/50+1)[:payloadBytes]
	start := time.Now()
	for _, codec := range []kgo.CompressionCodec{kgo.NoCompression(), kgo.Lz4Compression()} {
		cl, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.DefaultProduceTopic("bench_warmup"),
			kgo.AllowAutoTopicCreation(), kgo.ProducerBatchCompression(codec),
			kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(10000))
		if err != nil {
			return err
		}
		// The first failure, from franz-go's goroutine; it ends the loop.
		failed := make(chan error, 1)
		for sent := 0; sent < mb<<20 && len(failed) == 0; sent += len(value) {
			cl.Produce(ctx, &kgo.Record{Key: []byte("warm-up"), Value: value}, func(_ *kgo.Record, err error) {
				if err != nil {
					select {
					case failed <- err:
					default:
					}
				}
			})
		}
		err = cl.Flush(ctx)
		cl.Close()
		select {
		case err = <-failed:
		default:
		}
		if err != nil {
			return fmt.Errorf("warm up the broker: %w", err)
		}
	}
	progress("broker warmed up: %d MB uncompressed and %d MB lz4 in %.1f s", mb, mb, time.Since(start).Seconds())
	return nil
}

// warmBrokerSteady drives the broker for d the way the latency scenario
// does, before it is measured: an idempotent producer sending one small
// record per request to a LogAppendTime topic, transactional producers
// committing small transactions over two topics (as the relay in
// exactly-once mode does, with its checkpoint record), and a consumer
// reading each topic, read_committed for the transactional one, with the
// latency consumer's 10 ms fetch wait. Without it the first rate of each
// delivery mode was measured while the broker's JIT compiler compiled
// these paths: its compiler threads took about half of the broker's CPU
// in that window, and the broker's CPU per event fell to a quarter in the
// next one at the same rate.
func warmBrokerSteady(ctx context.Context, broker string, partitions int, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	const (
		small, txnTopic, ckTopic = "bench_warmup_small", "bench_warmup_txn", "bench_warmup_ck"
		producers                = 3 // transactional, each with its own id
	)
	for _, t := range []string{small, txnTopic} {
		if err := createAppendTimeTopic(ctx, broker, t, partitions); err != nil {
			return fmt.Errorf("warm up the broker: %w", err)
		}
	}
	start := time.Now()
	stop := start.Add(d) // producers finish what they started, then stop
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Consumers poll until the producers are done.
	cctx, stopConsumers := context.WithCancel(ctx)
	defer stopConsumers()
	// Records like the relay's: a key, a header, about 300 bytes, and
	// batches uncompressed (the relay's default).
	value := bytes.Repeat([]byte("w"), 300)
	rec := func(topic string) *kgo.Record {
		return &kgo.Record{Topic: topic, Key: []byte("order-42"), Value: value, Headers: []kgo.RecordHeader{{Key: "id", Value: []byte("42")}}}
	}
	var wg sync.WaitGroup
	errs := make(chan error, producers+3)
	var txns, records atomic.Int64
	var cwg sync.WaitGroup
	run := func(wg *sync.WaitGroup, f func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(); err != nil && ctx.Err() == nil {
				errs <- err
				cancel()
			}
		}()
	}
	run(&wg, func() error { // small idempotent produce requests, about 1,000/s
		cl, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.DefaultProduceTopic(small),
			kgo.ProducerLinger(2*time.Millisecond), kgo.ProducerBatchCompression(kgo.NoCompression()))
		if err != nil {
			return err
		}
		defer cl.Close()
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for ctx.Err() == nil && time.Now().Before(stop) {
			if err := cl.ProduceSync(ctx, rec(small)).FirstErr(); err != nil {
				return err
			}
			records.Add(1)
			select {
			case <-ctx.Done():
			case <-t.C:
			}
		}
		return nil
	})
	for i := range producers {
		run(&wg, func() error { // transactions of a few records and a checkpoint
			cl, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.TransactionalID(fmt.Sprintf("bench-warmup-%d", i)),
				kgo.ProducerBatchCompression(kgo.NoCompression()),
				kgo.AllowAutoTopicCreation(), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
			if err != nil {
				return err
			}
			defer cl.Close()
			for ctx.Err() == nil && time.Now().Before(stop) {
				if err := cl.BeginTransaction(); err != nil {
					return err
				}
				for range 5 {
					cl.Produce(ctx, rec(txnTopic), nil)
				}
				cl.Produce(ctx, rec(ckTopic), nil)
				if err := cl.Flush(ctx); err != nil {
					return err
				}
				if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
					return err
				}
				txns.Add(1)
			}
			return nil
		})
	}
	for _, c := range []struct {
		topic     string
		committed bool
	}{{small, false}, {txnTopic, true}} {
		run(&cwg, func() error {
			opts := []kgo.Opt{kgo.SeedBrokers(broker), kgo.ConsumeTopics(c.topic),
				kgo.FetchMaxWait(10 * time.Millisecond), kgo.FetchMinBytes(1)}
			if c.committed {
				opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
			}
			cl, err := kgo.NewClient(opts...)
			if err != nil {
				return err
			}
			defer cl.Close()
			for cctx.Err() == nil {
				cl.PollFetches(cctx)
			}
			return nil
		})
	}
	wg.Wait()
	stopConsumers()
	cwg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return fmt.Errorf("warm up the broker's steady-state paths: %w", err)
	}
	progress("broker warmed up for steady state: %d small produce requests, %d transactions in %.1f s", records.Load(), txns.Load(), time.Since(start).Seconds())
	return nil
}
