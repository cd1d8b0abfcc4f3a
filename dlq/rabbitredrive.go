package dlq

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/cdc-relay/cdc-relay/internal/backoff"
	"github.com/cdc-relay/cdc-relay/publisher"
	"github.com/cdc-relay/cdc-relay/rabbitmq"
	recordpkg "github.com/cdc-relay/cdc-relay/record"
	"github.com/cdc-relay/cdc-relay/relay"
	"github.com/cdc-relay/cdc-relay/router"
)

// RabbitRedriven is what one redrive of the dead-letter stream did.
type RabbitRedriven struct {
	Redriven int // published again, confirmed and routed
	// Failing were built again into a dead letter (still invalid), or
	// published again and returned (still unroutable) or nacked: they stay
	// pending.
	Failing int
	// Skipped: left out by the filters (Filtered), letters that cannot be
	// built again (NotBuilt), and retired or redriven before (Done).
	Filtered, NotBuilt, Done int
}

// ExitCode is the command's: relay.ExitFailed while a letter still fails.
func (r RabbitRedriven) ExitCode() int {
	if r.Failing > 0 {
		return relay.ExitFailed
	}
	return relay.ExitOK
}

// rabbitRedriveBatch is how many letters redrive publishes before it
// waits for their confirms and writes their positions: a kill repeats at
// most this many (consumers dedupe by message_id).
const rabbitRedriveBatch = 100

// RabbitRedriveOptions are what one dlq redrive of the dead-letter stream
// runs with.
type RabbitRedriveOptions struct {
	Config RabbitMQConfig
	// Relay are run's settings: the letters that hold the row's payload
	// are built again through today's row → record step (its schemas,
	// tables and catalog) and published as run publishes them
	// (relay.RabbitFormat). nil: those letters are skipped, pending.
	Relay   *relay.Config
	Filters Filters
	Log     *slog.Logger // nil: nothing is logged
	// Stdout gets a line per letter and the summary; Stderr the failure.
	Stdout, Stderr io.Writer
}

// RedriveRabbitMQ sends the pending letters of the dead-letter stream that
// the filters keep on: those of Config.RedriveKinds as they are, to their
// exchange with their routing key; with Relay, invalid_routing_key ones
// with the routing key today's --routing-key gives them, and the others
// built again through today's row → record step. It publishes with mandatory and confirms; a letter
// confirmed and routed gets a redriven position, one still invalid,
// returned or nacked stays pending. It reads the stream to its end as of
// now, or with Filters.Follow on until ctx ends. It prints a line per
// letter, the summary and a failure, and returns what it did and the
// command's exit code (relay.ExitOK, ExitFailed, ExitConfig).
func RedriveRabbitMQ(ctx context.Context, o RabbitRedriveOptions) (RabbitRedriven, int) {
	if len(o.Config.RedriveKinds) == 0 {
		o.Config.RedriveKinds = []string{rabbitmq.KindUnroutable}
	}
	if o.Config.RoutingKey == nil {
		o.Config.RoutingKey = func(l *recordpkg.Letter) string { et, _ := l.Header(router.HeaderEventType); return string(et) }
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	r := &rabbitRedriver{o: o, cfg: &o.Config, by: retiredBy()}
	code := r.run(ctx)
	return r.res, code
}

// rabbitRedriver holds one redrive of the dead-letter stream.
type rabbitRedriver struct {
	o      RabbitRedriveOptions
	cfg    *RabbitMQConfig
	step   *rowStep        // nil without Relay
	format rabbitmq.Format // run's, with Relay
	q      *rabbitDLQ
	c      *rabbitmq.Confirmer // nil in a dry run
	by     string
	batch  []rabbitOut
	res    RabbitRedriven
	// next is the offset after the last letter handled (reported, or put
	// in the batch): with --follow, a read after a lost connection starts
	// there.
	next int64
	b    backoff.Backoff // between reconnects
}

// rabbitOut is a letter of the batch and the message it is sent as.
type rabbitOut struct {
	rl *rabbitLetter
	id string // the event's id: an unconfigured_table letter's is its row's
	m  rabbitmq.Outgoing
}

func (r *rabbitRedriver) fail(what string, err error) int {
	return relay.FailExit(r.o.Stderr, "cdc-relay dlq redrive failed: ", what, err)
}

func (r *rabbitRedriver) run(ctx context.Context) int {
	f := &r.o.Filters
	if r.o.Relay != nil {
		var code int
		var ok bool
		if r.step, code, ok = newRowStep(ctx, r.o.Relay, r.o.Log, f.DryRun, r.o.Stderr); !ok {
			return code
		}
		format, err := relay.RabbitFormat(r.o.Relay)
		if err != nil {
			return r.fail("", err)
		}
		r.format = format
	}
	q, err := openRabbitDLQ(ctx, r.cfg)
	if err != nil {
		return r.fail("", err)
	}
	defer q.close()
	r.q = q
	if !f.DryRun {
		if r.c, err = rabbitmq.NewConfirmer(q.conn); err != nil {
			return r.fail("RabbitMQ", fmt.Errorf("open a channel: %w", err))
		}
		defer func() { r.c.Close() }() // the last one, after reconnects
	}
	r.o.Log.Info("dlq redrive", "version", relay.Version, "dlq_stream", r.cfg.Stream, "positions", r.cfg.positions(), "dry_run", f.DryRun, "follow", f.Follow)
	err = r.follow(ctx)
	if err == nil && ctx.Err() != nil && !f.Follow {
		err = errors.New("interrupted by a signal")
	}
	r.summary(err)
	if err != nil {
		return r.fail("", err)
	}
	return r.res.ExitCode()
}

// loop reads the letters from r.next on a goroutine of its own and sends
// them on in batches: a batch is published once it is full, or as soon as
// no letter is waiting, so that one letter appended while following goes
// at once. A failed read is a *readError.
func (r *rabbitRedriver) loop(ctx context.Context) error {
	rctx, stop := context.WithCancel(ctx)
	letters := make(chan *rabbitLetter)
	readErr := make(chan error, 1)
	go func() {
		defer close(letters)
		readErr <- r.q.read(rctx, r.next, !r.o.Filters.Follow, func(rl *rabbitLetter) error {
			select {
			case letters <- rl:
			case <-rctx.Done(): // the read ends with rctx
			}
			return nil
		})
	}()
	err := func() error {
		for {
			var rl *rabbitLetter
			open := true
			select {
			case rl, open = <-letters:
			default:
				if err := r.flush(ctx); err != nil {
					return err
				}
				rl, open = <-letters
			}
			if !open {
				return r.flush(ctx)
			}
			if r.o.Filters.Follow && ctx.Err() != nil {
				return r.flush(ctx) // what is not sent yet stays pending
			}
			if err := r.letter(ctx, rl); err != nil {
				return errors.Join(err, r.flush(ctx))
			}
			r.next = rl.offset + 1
			if len(r.batch) >= rabbitRedriveBatch {
				if err := r.flush(ctx); err != nil {
					return err
				}
			}
		}
	}()
	stop()
	for range letters { // let the reader end
	}
	if rerr := <-readErr; err == nil && rerr != nil {
		return &readError{rerr}
	}
	return err
}

// letter decides what becomes of one letter: skipped and reported, or in
// the batch to publish.
func (r *rabbitRedriver) letter(ctx context.Context, rl *rabbitLetter) error {
	out, f := r.o.Stdout, &r.o.Filters
	if rl.done != nil {
		r.skipDone(rl)
		return nil
	}
	if why := f.filtered(rl.l); why != "" {
		r.res.Filtered++
		fmt.Fprintf(out, "skipped %s: left out by %s, pending\n", rl.where(), why)
		return nil
	}
	o := rabbitOut{rl: rl, id: rl.id()}
	switch kind := rl.l.Kind(); {
	case slices.Contains(r.cfg.RedriveKinds, kind):
		o.m = republish(rl, r.cfg)
	case kind == rabbitmq.KindInvalidRouteKey && r.step != nil:
		if !r.rekey(rl, &o) {
			return nil
		}
	default:
		built, err := r.build(ctx, rl, &o)
		if !built {
			return err
		}
	}
	if f.DryRun {
		r.res.Redriven++
		fmt.Fprintf(out, "would be redriven %s exchange=%s routing_key=%s\n", rl.whereID(o.id), o.m.Exchange, relay.Token([]byte(o.m.RoutingKey)))
		return nil
	}
	r.batch = append(r.batch, o)
	return nil
}

// skipDone reports rl skipped: it has a position.
func (r *rabbitRedriver) skipDone(rl *rabbitLetter) {
	r.res.Done++
	what := "redriven"
	if rl.done.Action == ActionRetired {
		what = "retired (dlq retire, reason " + strconv.Quote(rl.done.Reason) + ")"
	}
	fmt.Fprintf(r.o.Stdout, "skipped %s: %s at %s\n", rl.where(), what, rl.done.At.Format(time.RFC3339))
}

// build builds a letter that holds the row's payload again into the
// message o is sent as, and reports true; else it reports the letter
// skipped or still failing, and an error when building failed for a cause
// that is not the letter's (the registry unreachable).
func (r *rabbitRedriver) build(ctx context.Context, rl *rabbitLetter, o *rabbitOut) (bool, error) {
	out := r.o.Stdout
	if r.step == nil {
		r.res.NotBuilt++
		fmt.Fprintf(out, "skipped %s: its error_kind %s holds the row's payload, and redrive was given no relay settings to build it again with: pending\n", rl.where(), rl.l.Kind())
		return false, nil
	}
	rb, err := r.step.rebuild(rl.l)
	if err != nil {
		r.res.NotBuilt++
		fmt.Fprintf(out, "skipped %s: %v; pending until a redrive builds it or dlq retire retires it (cdc-relay dlq retire)\n", rl.where(), err)
		r.o.Log.Warn("dead letter skipped: it cannot be built again; it stays pending until a redrive builds it or dlq retire retires it", "offset", rl.offset, "id", relay.Token([]byte(rl.id())), "reason", err.Error())
		return false, nil
	}
	if len(rb.Row.ID) > 0 {
		o.id = string(rb.Row.ID) // an unconfigured_table letter's row
	}
	rec := publisher.NewRecord()
	defer publisher.Release(rec)
	inv, err := r.step.builder.Build(ctx, rec, rb.CommitTime, &rb.Row)
	if err != nil {
		return false, fmt.Errorf("build the message of dead letter %s: %w", rl.whereID(o.id), err)
	}
	kind, reason := "", ""
	if inv != nil {
		kind, reason = inv.Kind, inv.Reason
	} else {
		m, dead := r.format.Message(rec) // it copies what it keeps of rec
		if dead != "" {
			kind, _ = m.Publishing.Headers[rabbitmq.HeaderErrorKind].(string)
			reason, _ = m.Publishing.Headers[rabbitmq.HeaderError].(string)
		}
		o.m = rabbitmq.Outgoing{Exchange: m.Exchange, RoutingKey: m.RoutingKey, Publishing: m.Publishing}
	}
	if kind == "" {
		return true, nil
	}
	r.fails(rl.whereID(o.id), kind, reason)
	return false, nil
}

// rekey makes an invalid_routing_key letter, which holds the event as
// published, the message o is sent as: to run's exchange, with the routing
// key today's --routing-key gives it, and reports true; a key still over
// 255 bytes is reported still failing.
func (r *rabbitRedriver) rekey(rl *rabbitLetter, o *rabbitOut) bool {
	et, _ := rl.l.Header(router.HeaderEventType)
	at, _ := rl.l.Header(router.HeaderAggregateType)
	key := r.format.RoutingKey.Append(nil, et, at, rl.l.Key)
	if len(key) > rabbitmq.MaxRoutingKeyBytes {
		r.fails(rl.where(), rabbitmq.KindInvalidRouteKey, fmt.Sprintf("the routing key --routing-key gives is %d bytes, and AMQP takes at most %d", len(key), rabbitmq.MaxRoutingKeyBytes))
		return false
	}
	o.m = republish(rl, r.cfg)
	o.m.Exchange, o.m.RoutingKey = r.format.Exchange, string(key)
	return true
}

// fails reports the letter at where still failing: built again into a
// dead letter of kind, for reason.
func (r *rabbitRedriver) fails(where, kind, reason string) {
	r.res.Failing++
	prefix := ""
	if r.o.Filters.DryRun {
		prefix = "would be "
	}
	fmt.Fprintf(r.o.Stdout, "%sstill failing %s kind=%s reason=%s\n", prefix, where, kind, strconv.Quote(reason))
}

// flush publishes the batch, waits for every confirm and records the
// positions of the letters confirmed and routed. It finishes even once ctx
// ended (a follow stopped), within a minute.
func (r *rabbitRedriver) flush(ctx context.Context) error {
	if len(r.batch) == 0 {
		return nil
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	msgs := make([]rabbitmq.Outgoing, len(r.batch))
	for i, o := range r.batch {
		msgs[i] = o.m
	}
	fates, err := r.c.Publish(fctx, msgs)
	if err != nil {
		return fmt.Errorf("publish %d letters again: %w", len(msgs), err)
	}
	var ps []RabbitPosition
	now := time.Now().UTC()
	for i, o := range r.batch {
		if fates[i] == nil {
			p := r.q.position(o.rl, ActionRedriven, now, r.by)
			p.ID, p.Exchange, p.RoutingKey = o.id, msgs[i].Exchange, msgs[i].RoutingKey
			ps = append(ps, p)
		}
	}
	// The positions after the confirms: a kill in between sends those
	// letters again next time (at least once).
	if err := r.q.record(fctx, ps); err != nil {
		return err
	}
	for i, o := range r.batch {
		where, ex, rk := o.rl.whereID(o.id), msgs[i].Exchange, relay.Token([]byte(msgs[i].RoutingKey))
		if fates[i] != nil {
			r.res.Failing++
			fmt.Fprintf(r.o.Stdout, "still failing %s exchange=%s routing_key=%s reason=%s\n", where, ex, rk, strconv.Quote(fates[i].Error()))
			continue
		}
		r.res.Redriven++
		fmt.Fprintf(r.o.Stdout, "redriven %s exchange=%s routing_key=%s\n", where, ex, rk)
	}
	r.batch = r.batch[:0]
	return nil
}

// summary prints the summary line.
func (r *rabbitRedriver) summary(err error) {
	res := r.res
	prefix := "redrive"
	switch {
	case r.o.Filters.DryRun:
		prefix = "dry run: would have"
	case err != nil:
		prefix = "redrive incomplete"
	}
	fmt.Fprintf(r.o.Stdout, "%s: redriven %d, still failing %d, skipped %d (%d left out by the filters, %d that cannot be built again, %d retired or redriven before) from stream %s\n",
		prefix, res.Redriven, res.Failing, res.Filtered+res.NotBuilt+res.Done, res.Filtered, res.NotBuilt, res.Done, r.cfg.Stream)
}

// republish is the event a letter holds, to cfg.Exchange (or the
// letter's) with its routing key: its body and properties, persistent,
// without the dead-letter headers.
func republish(rl *rabbitLetter, cfg *RabbitMQConfig) rabbitmq.Outgoing {
	d := rl.d
	headers := amqp.Table{}
	for k, v := range d.Headers {
		if !letterOnly[k] {
			headers[k] = v
		}
	}
	ex := cfg.Exchange
	if ex == "" {
		h, _ := rl.l.Header(HeaderExchange)
		ex = string(h)
	}
	key, ok := rl.l.Header(HeaderRoutingKey)
	rk := string(key)
	if !ok {
		rk = cfg.RoutingKey(rl.l)
	}
	return rabbitmq.Outgoing{Exchange: ex, RoutingKey: rk, Publishing: amqp.Publishing{
		Headers: headers, ContentType: d.ContentType, ContentEncoding: d.ContentEncoding, Priority: d.Priority,
		CorrelationId: d.CorrelationId, MessageId: d.MessageId, Timestamp: d.Timestamp, Type: d.Type, AppId: d.AppId,
		Body: d.Body,
	}}
}
