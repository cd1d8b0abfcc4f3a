package main

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// brokerJVM are the JVM flags Kafka's own start scripts give a broker
// (kafka-server-start.sh: a 1 GB heap; kafka-run-class.sh: G1 with these
// settings). The benchmark's broker runs with them, as a broker started
// from a Kafka distribution would, instead of kafkatest's smaller test heap.
var brokerJVM = []string{"-Xms1g", "-Xmx1g", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
	"-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent"}

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
