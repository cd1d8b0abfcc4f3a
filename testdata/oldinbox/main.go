// Command oldinbox is the consumer group member of an inbox from before
// franz-go: a kafka-go Reader configured as inbox.Consumer.Run configured
// it (the same GroupBalancers, range then roundrobin, kafka-go's defaults,
// and the same session, rebalance and fetch settings), applying each event
// once as the inbox does: one transaction holding the processed_messages
// mark and, if the mark is new, the effect; the offset is committed after.
// The inbox's mixed-group test runs it beside the new inbox in one group.
//
// It prints "applied <id>" or "duplicate <id>" per event, the reader's
// logs prefixed "kafka-go: " and its errors prefixed "kafka-go error: ",
// and runs until SIGTERM (exit 0). It lives in a module of its own under
// testdata, so kafka-go is no dependency of the project.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/segmentio/kafka-go"
)

func main() {
	var (
		brokers  = flag.String("brokers", "", "Kafka bootstrap broker")
		group    = flag.String("group", "", "consumer group, and the consumer of processed_messages")
		topic    = flag.String("topic", "", "topic to read")
		pgURL    = flag.String("pg-url", "", "PostgreSQL URL; the database has processed_messages and effects (event_id, instance)")
		instance = flag.String("instance", "old", "written into effects.instance")
		session  = flag.Duration("session-timeout", 6*time.Second, "group session timeout")
	)
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, *brokers, *group, *topic, *pgURL, *instance, *session); err != nil {
		fmt.Fprintln(os.Stderr, "oldinbox:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, brokers, group, topic, pgURL, instance string, session time.Duration) error {
	pool, err := pgxpool.New(ctx, pgURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers:                []string{brokers},
		GroupID:                group,
		GroupTopics:            []string{topic},
		GroupBalancers:         []kafka.GroupBalancer{kafka.RangeGroupBalancer{}, kafka.RoundRobinGroupBalancer{}},
		Dialer:                 &kafka.Dialer{ClientID: "oldinbox", Timeout: 10 * time.Second, DualStack: true},
		IsolationLevel:         kafka.ReadCommitted,
		StartOffset:            kafka.FirstOffset,
		CommitInterval:         0,
		MinBytes:               1,
		MaxBytes:               10 << 20,
		MaxWait:                250 * time.Millisecond,
		SessionTimeout:         session,
		RebalanceTimeout:       session,
		HeartbeatInterval:      session / 10,
		JoinGroupBackoff:       time.Second,
		ReadBackoffMax:         time.Second,
		WatchPartitionChanges:  true,
		PartitionWatchInterval: 2 * time.Second,
		Logger:                 kafka.LoggerFunc(func(msg string, args ...any) { fmt.Printf("kafka-go: "+msg+"\n", args...) }),
		ErrorLogger:            kafka.LoggerFunc(func(msg string, args ...any) { fmt.Printf("kafka-go error: "+msg+"\n", args...) }),
	})
	defer r.Close()
	for {
		m, err := r.FetchMessage(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			fmt.Println("kafka-go error: fetch:", err)
			continue
		}
		var id string
		for _, h := range m.Headers {
			if h.Key == "id" {
				id = string(h.Value)
			}
		}
		for {
			dup, err := apply(ctx, pool, group, id, instance)
			if ctx.Err() != nil {
				return nil
			}
			if err == nil {
				if dup {
					fmt.Println("duplicate", id)
				} else {
					fmt.Println("applied", id)
				}
				break
			}
			fmt.Println("apply failed; retrying:", err)
			time.Sleep(100 * time.Millisecond)
		}
		if err := r.CommitMessages(ctx, m); err != nil && !errors.Is(err, context.Canceled) {
			fmt.Println("kafka-go error: commit:", err)
		}
	}
}

// apply runs one event's transaction: the mark, then the effect if the
// mark is new.
func apply(ctx context.Context, pool *pgxpool.Pool, consumer, id, instance string) (dup bool, err error) {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	tag, err := tx.Exec(ctx, "INSERT INTO processed_messages (consumer, message_id) VALUES ($1, $2) ON CONFLICT DO NOTHING", consumer, id)
	if err != nil {
		return false, err
	}
	if tag.RowsAffected() == 0 {
		return true, nil
	}
	if _, err := tx.Exec(ctx, "INSERT INTO effects (event_id, instance) VALUES ($1, $2)", id, instance); err != nil {
		return false, err
	}
	return false, tx.Commit(ctx)
}
