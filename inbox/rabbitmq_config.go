package inbox

import (
	"crypto/tls"
	"database/sql"
	"log/slog"
	"net/url"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// MaxHandlerTimeout is the longest RabbitMQConfig.HandlerTimeout that
// RabbitMQ's consumer_timeout (30 minutes by default) leaves room for: a
// delivery held unacknowledged longer than consumer_timeout closes the
// channel, and every delivery on it comes again.
const MaxHandlerTimeout = 25 * time.Minute

// RabbitMQConfig configures a RabbitMQConsumer: the inbox fed by a
// RabbitMQ quorum queue instead of Kafka topics. Consumer, URL and either
// DB and Handler (pgx) or SQLDB and SQLHandler (database/sql) are
// required. The fields shared with Config mean the same.
type RabbitMQConfig[T any] struct {
	// Consumer names this consumer: the consumer column of
	// processed_messages (each consumer deduplicates on its own) and the
	// default queue name. Required.
	Consumer string
	// URL is the broker, amqp://user:pass@host:port/vhost or amqps://...
	// for TLS. The password is never logged. Required.
	URL string
	// TLS configures amqps (RootCAs, client certificates, ServerName). It
	// needs an amqps URL. Default nil: an amqps URL verifies the broker
	// against the system roots.
	TLS *tls.Config
	// Queue is the quorum queue consumed. Default Consumer.
	Queue string
	// Exchange is the relay's exchange (its --rabbitmq-exchange), declared
	// as a durable topic exchange and bound to Queue with RoutingKeys.
	// Default "outbox". Not used with Passive.
	Exchange string
	// RoutingKeys are the binding patterns of Queue on Exchange, e.g.
	// "Order.*" or "OrderCreated" (the relay's default routing key is the
	// event type). Default ["#"]: every event. Not used with Passive.
	RoutingKeys []string
	// Passive uses a queue that already exists, as it was declared: nothing
	// is declared or bound, and a queue that does not exist is an error.
	// Its delivery limit and dead-letter exchange are then whatever it has;
	// give DeliveryLimit the queue's x-delivery-limit so that the consumer
	// counts an event's attempts against it. Default false: the
	// consumer declares the exchange, the queue, its dead-letter exchange
	// and queue, and the bindings, every queue argument explicitly.
	Passive bool
	// DeliveryLimit is the queue's x-delivery-limit: a message is
	// dead-lettered when it is given back once more after DeliveryLimit
	// redeliveries. A failing event is tried DeliveryLimit+1 times in all,
	// in place (the delivery is kept), its earlier deliveries counting as
	// attempts, then given back until the broker dead-letters it. Default
	// 5, as in the article; RabbitMQ 4.0 would default to 20 without it.
	DeliveryLimit int
	// DeadLetterExchange is the queue's x-dead-letter-exchange, declared as
	// a durable fanout exchange (as deploy/rabbitmq/definitions.json
	// declares outbox.dlx). Default Queue + ".dlx".
	DeadLetterExchange string
	// DeadLetterQueue is a quorum queue bound to DeadLetterExchange, where
	// dead letters wait to be inspected. Default Queue + ".dlq".
	DeadLetterQueue string
	// Competing lets every running instance consume the queue at once
	// (x-single-active-consumer false): more throughput, and no order per
	// aggregate between instances. Default false: the queue is declared
	// with x-single-active-consumer true, one instance consumes and the
	// others wait as hot standbys, and each aggregate's events are applied
	// in queue order.
	Competing bool
	// Prefetch is the channel's basic.qos prefetch count: the most
	// deliveries held unacknowledged. Default 10, as in the article.
	Prefetch int
	// HandlerTimeout bounds each attempt's transaction (the mark, the
	// handler, the commit); an attempt that runs out counts as failed.
	// Default 1 minute; at most MaxHandlerTimeout (25 minutes), under
	// RabbitMQ's consumer_timeout.
	HandlerTimeout time.Duration
	// RegistryURL is the schema registry that application/avro values'
	// writer schemas come from (Confluent wire format). Default "": only
	// JSON and CloudEvents JSON values are decoded; an Avro value is then
	// dead-lettered.
	RegistryURL string
	// DB begins the per-event transactions (pgx), for Handler.
	DB DB
	// Handler applies an event in a pgx.Tx of DB.
	Handler Handler[T]
	// SQLDB begins the per-event transactions with database/sql, for
	// SQLHandler.
	SQLDB *sql.DB
	// SQLHandler applies an event in a *sql.Tx of SQLDB.
	SQLHandler SQLHandler[T]
	// TxOptions apply to every event's (or batch's) transaction, as in
	// Config. Default: the server's defaults.
	TxOptions pgx.TxOptions
	// BatchSize runs up to BatchSize deliveries of one worker (those
	// already received) in one transaction, as in Config; at most Prefetch.
	// Default 1.
	BatchSize int
	// Workers process events concurrently; an aggregate (aggregate_type
	// and aggregate_id) always goes to the same worker. Default 4.
	Workers int
	// TransientTimeout bounds how long one event's transient errors are
	// retried without counting an attempt; after it the next failure
	// counts as one. HandlerTimeout plus TransientTimeout must stay within
	// MaxHandlerTimeout. Default 10 minutes.
	TransientTimeout time.Duration
	// Table is the processed_messages table (docs/inbox.sql). Default
	// "processed_messages".
	Table string
	// RetryMin and RetryMax bound the backoff between the attempts of a
	// failed event (doubling), between transient retries, and between
	// reconnects; defaults 100 ms and 5 s.
	RetryMin, RetryMax time.Duration
	// Retention, CleanupInterval and CleanupBatch delete old marks, as in
	// Config. Default: no cleanup in Run.
	Retention       time.Duration
	CleanupInterval time.Duration
	CleanupBatch    int
	// OnDuplicate, when set, is called after an event whose mark was
	// already there was skipped (and acknowledged).
	OnDuplicate func(ev *Event[T])
	// Logger receives the consumer's logs; default slog.Default().
	Logger *slog.Logger
}

// validate checks the settings and fills in the defaults of RabbitMQ's;
// it returns the Config of the processing core the Kafka consumer shares,
// with its defaults: one attempt per delivery (a counted failure gives the
// delivery back to the broker, which counts it against the delivery
// limit), transient errors retried in place.
func (c *RabbitMQConfig[T]) validate() (Config[T], error) {
	core := Config[T]{Consumer: c.Consumer, DB: c.DB, Handler: c.Handler, SQLDB: c.SQLDB, SQLHandler: c.SQLHandler,
		TxOptions: c.TxOptions, TransientTimeout: c.TransientTimeout, BatchSize: c.BatchSize, Workers: c.Workers,
		Table: c.Table, RetryMin: c.RetryMin, RetryMax: c.RetryMax, Retention: c.Retention,
		CleanupInterval: c.CleanupInterval, CleanupBatch: c.CleanupBatch, OnDuplicate: c.OnDuplicate, Logger: c.Logger}
	switch {
	case c.Consumer == "":
		return core, &ConfigError{"Consumer", "empty: name the consumer (it scopes deduplication and is the default queue)"}
	case c.URL == "":
		return core, &ConfigError{"URL", "empty: give the broker's amqp:// or amqps:// URL"}
	case c.DeliveryLimit < 0:
		return core, &ConfigError{"DeliveryLimit", "negative: give the queue's x-delivery-limit (default 5)"}
	case c.Prefetch < 0:
		return core, &ConfigError{"Prefetch", "negative: give the deliveries held at once (default 10)"}
	case c.HandlerTimeout < 0:
		return core, &ConfigError{"HandlerTimeout", "negative: give the longest attempt (default 1m)"}
	case c.HandlerTimeout > MaxHandlerTimeout:
		return core, &ConfigError{"HandlerTimeout", c.HandlerTimeout.String() + " is over " + MaxHandlerTimeout.String() +
			": RabbitMQ closes the channel of a delivery unacknowledged for consumer_timeout (30m by default), and it comes again"}
	}
	u, err := url.Parse(c.URL)
	switch {
	case err != nil:
		return core, &ConfigError{"URL", "does not parse (the password is not shown)"}
	case u.Scheme != "amqp" && u.Scheme != "amqps":
		return core, &ConfigError{"URL", "scheme " + strconv.Quote(u.Scheme) + ": want amqp or amqps"}
	case c.TLS != nil && u.Scheme != "amqps":
		return core, &ConfigError{"TLS", "is set but URL is not amqps://: use amqps, or leave TLS nil"}
	}
	if err := core.validateProcessing(); err != nil {
		return core, err
	}
	core.processingDefaults()
	core.MaxAttempts = 1
	if c.Queue == "" {
		c.Queue = c.Consumer
	}
	if c.Exchange == "" {
		c.Exchange = "outbox"
	}
	if len(c.RoutingKeys) == 0 {
		c.RoutingKeys = []string{"#"}
	}
	if c.DeliveryLimit == 0 {
		c.DeliveryLimit = 5
	}
	if c.DeadLetterExchange == "" {
		c.DeadLetterExchange = c.Queue + ".dlx"
	}
	if c.DeadLetterQueue == "" {
		c.DeadLetterQueue = c.Queue + ".dlq"
	}
	if c.Prefetch == 0 {
		c.Prefetch = 10
	}
	if c.HandlerTimeout == 0 {
		c.HandlerTimeout = time.Minute
	}
	if core.BatchSize > c.Prefetch {
		return core, &ConfigError{"BatchSize", strconv.Itoa(core.BatchSize) + " is over Prefetch (" + strconv.Itoa(c.Prefetch) + "): a batch is made of deliveries held at once"}
	}
	if sum := c.HandlerTimeout + core.TransientTimeout; sum > MaxHandlerTimeout {
		return core, &ConfigError{"TransientTimeout", "HandlerTimeout + TransientTimeout is " + sum.String() +
			", over " + MaxHandlerTimeout.String() + ": a delivery would be held near RabbitMQ's consumer_timeout (30m)"}
	}
	return core, nil
}
