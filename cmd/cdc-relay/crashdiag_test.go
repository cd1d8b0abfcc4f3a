package main

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// txnIDs are the transactional ids the crash run's relays logged.
func (cr *crashRun) txnIDs() []string {
	re := regexp.MustCompile(`transactional_id=(\S+)`)
	var ids []string
	for _, r := range cr.relays {
		for _, m := range re.FindAllStringSubmatch(r.Output(), -1) {
			if !slices.Contains(ids, m[1]) {
				ids = append(ids, m[1])
			}
		}
	}
	return ids
}

// describeTxnState is, for the diagnosis of a stuck exactly-once stream,
// what the broker says of the topics' producers (an open transaction's
// first offset per producer) and of the transactional ids' transactions.
func describeTxnState(addr string, topics []string, txnIDs []string) string {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return "\n  describe: " + err.Error()
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var b strings.Builder
	set := kadm.TopicsSet{}
	for _, t := range topics {
		set.Add(t)
	}
	ps, err := adm.DescribeProducers(ctx, set)
	if err != nil {
		fmt.Fprintf(&b, "\n  DescribeProducers: %v", err)
	}
	ps.EachProducer(func(p kadm.DescribedProducer) {
		fmt.Fprintf(&b, "\n  producer %d epoch %d on %s[%d]: open transaction from offset %d, last sequence %d, coordinator epoch %d, last produced %s",
			p.ProducerID, p.ProducerEpoch, p.Topic, p.Partition, p.CurrentTxnStartOffset, p.LastSequence, p.CoordinatorEpoch, time.UnixMilli(p.LastTimestamp).UTC().Format(time.RFC3339Nano))
	})
	if len(txnIDs) > 0 {
		txns, err := adm.DescribeTransactions(ctx, txnIDs...)
		if err != nil {
			fmt.Fprintf(&b, "\n  DescribeTransactions: %v", err)
		}
		for _, t := range txns.Sorted() {
			fmt.Fprintf(&b, "\n  transaction %s: state %s, producer %d epoch %d, started %s, partitions %v, err %v",
				t.TxnID, t.State, t.ProducerID, t.ProducerEpoch, time.UnixMilli(t.StartTimestamp).UTC().Format(time.RFC3339Nano), t.Topics, t.Err)
		}
	}
	return b.String()
}

// dumpTail lists the last n records of a partition (dumpPartition).
func dumpTail(t *testing.T, addr, topic string, partition int32, n int) string {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return err.Error()
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return "\n  " + topic + " end offsets: " + err.Error()
	}
	end, ok := ends.Lookup(topic, partition)
	if !ok {
		return "\n  " + topic + ": no end offset"
	}
	return dumpPartition(t, addr, topic, partition, end.Offset-int64(n), n)
}
