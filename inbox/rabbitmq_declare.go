package inbox

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	amqp "github.com/rabbitmq/amqp091-go"
)

// QueueArgumentsError is a declare that RabbitMQ refused with 406
// PRECONDITION_FAILED: the queue exists with other arguments (or another
// durability) than the consumer declares. Retrying cannot help: delete the
// queue, make the config match it, or set RabbitMQConfig.Passive to use it
// as it is.
type QueueArgumentsError struct {
	// Queue is the queue's name.
	Queue string
	// Wanted are the arguments the consumer declares, "durable" included.
	Wanted amqp.Table
	// Existing are the queue's arguments as far as the broker told them:
	// each 406 names one argument that differs and its current value (the
	// consumer declares again with that value to learn the next one). A
	// value of nil means the queue does not have the argument. Arguments
	// not named are as wanted when Complete is true.
	Existing amqp.Table
	// Complete is true when every difference was learned.
	Complete bool
	// Err is the broker's first refusal.
	Err *amqp.Error
}

func (e *QueueArgumentsError) Error() string {
	rest := "the other arguments are as wanted"
	if !e.Complete {
		rest = "the other arguments could not be learned"
	}
	return fmt.Sprintf("inbox: queue %q exists with other arguments than the consumer declares (%s): wanted %s; existing %s (%s): "+
		"delete the queue, change the config to match it, or set Passive to use it as declared",
		e.Queue, e.Err.Reason, formatTable(e.Wanted), formatTable(e.Existing), rest)
}

func (e *QueueArgumentsError) Unwrap() error { return e.Err }

// ExchangeTypeError is an exchange declare that RabbitMQ refused with 406:
// the exchange exists with another type or durability than the durable
// exchange of Type the consumer declares (topic for Exchange, fanout for
// DeadLetterExchange).
type ExchangeTypeError struct {
	Exchange string
	Type     string
	Err      *amqp.Error
}

func (e *ExchangeTypeError) Error() string {
	return fmt.Sprintf("inbox: exchange %q exists with another type or durability than a durable %s exchange: %s (name another, or set Passive)", e.Exchange, e.Type, e.Err.Reason)
}

func (e *ExchangeTypeError) Unwrap() error { return e.Err }

// ErrQueueNotFound is returned by Run with Passive when the queue does not
// exist.
var ErrQueueNotFound = errors.New("inbox: the queue does not exist (Passive declares nothing): declare it, or unset Passive")

// queueArgs are the arguments of the consumed queue, every one explicit:
// RabbitMQ 4.x changed some defaults (see doc.go).
func (r *RabbitMQConsumer[T]) queueArgs() amqp.Table {
	c := &r.cfg
	return amqp.Table{
		"x-queue-type":             "quorum",
		"x-delivery-limit":         int64(c.DeliveryLimit),
		"x-dead-letter-exchange":   c.DeadLetterExchange,
		"x-dead-letter-strategy":   "at-least-once",
		"x-overflow":               "reject-publish",
		"x-single-active-consumer": !c.Competing,
	}
}

// declare makes the topology on channels of its own (a refused declare
// closes its channel): the exchange (topic), the dead-letter exchange
// (fanout: dead letters keep their routing keys) and queue,
// the queue and its bindings; with Passive it only checks that the queue
// exists. An error that retrying cannot fix is returned as fatal.
func (r *RabbitMQConsumer[T]) declare(conn *amqp.Connection) error {
	c := &r.cfg
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	defer ch.Close()
	if c.Passive {
		if _, err := ch.QueueDeclarePassive(c.Queue, true, false, false, false, nil); err != nil {
			if missing(err) {
				return fatal{fmt.Errorf("%w: %q", ErrQueueNotFound, c.Queue)}
			}
			return refused(err)
		}
		return nil
	}
	for _, ex := range []struct{ name, kind string }{{c.Exchange, amqp.ExchangeTopic}, {c.DeadLetterExchange, amqp.ExchangeFanout}} {
		if err := ch.ExchangeDeclare(ex.name, ex.kind, true, false, false, false, nil); err != nil {
			var aerr *amqp.Error
			if errors.As(err, &aerr) && aerr.Code == amqp.PreconditionFailed {
				return fatal{&ExchangeTypeError{Exchange: ex.name, Type: ex.kind, Err: aerr}}
			}
			return refused(err)
		}
	}
	// The dead-letter queue refuses rather than drops when it is full (it
	// has no limit of its own; a policy may give it one): with
	// at-least-once dead-lettering the source queue then keeps the letter.
	dlqArgs := amqp.Table{"x-queue-type": "quorum", "x-overflow": "reject-publish"}
	if _, err := ch.QueueDeclare(c.DeadLetterQueue, true, false, false, false, dlqArgs); err != nil {
		return r.mismatch(conn, c.DeadLetterQueue, dlqArgs, err)
	}
	if err := ch.QueueBind(c.DeadLetterQueue, "", c.DeadLetterExchange, false, nil); err != nil {
		return refused(err)
	}
	args := r.queueArgs()
	if _, err := ch.QueueDeclare(c.Queue, true, false, false, false, args); err != nil {
		return r.mismatch(conn, c.Queue, args, err)
	}
	for _, key := range c.RoutingKeys {
		if err := ch.QueueBind(c.Queue, key, c.Exchange, false, nil); err != nil {
			return refused(err)
		}
	}
	return nil
}

// mismatch turns a refused queue declare into a *QueueArgumentsError when
// it is a 406, learning the existing arguments by declaring again with
// the values each refusal names.
func (r *RabbitMQConsumer[T]) mismatch(conn *amqp.Connection, queue string, wanted amqp.Table, err error) error {
	var first *amqp.Error
	if !errors.As(err, &first) || first.Code != amqp.PreconditionFailed {
		return refused(err)
	}
	want := maps(wanted)
	want["durable"] = true
	qe := &QueueArgumentsError{Queue: queue, Wanted: want, Existing: amqp.Table{}, Err: first}
	probe := maps(wanted)
	durable := true
	refusal := first
	for range 16 {
		name, current, ok := parseInequivalent(refusal.Reason, probe[argName(refusal.Reason)])
		if !ok {
			return fatal{qe}
		}
		qe.Existing[name] = current
		switch {
		case name == "durable":
			b, _ := current.(bool)
			durable = b
		case current == nil:
			delete(probe, name)
		default:
			probe[name] = current
		}
		ch, err := conn.Channel()
		if err != nil {
			return fatal{qe}
		}
		_, err = ch.QueueDeclare(queue, durable, false, false, false, probe)
		ch.Close()
		if err == nil {
			qe.Complete = true
			return fatal{qe}
		}
		if !errors.As(err, &refusal) || refusal.Code != amqp.PreconditionFailed {
			return fatal{qe}
		}
	}
	return fatal{qe}
}

// inequivalent matches RabbitMQ's 406 reason for a declare whose argument
// differs, e.g. "inequivalent arg 'x-delivery-limit' for queue 'q' in
// vhost '/': received '5' but current is '3'"; the values can also be
// none or "the value 'dlx' of type 'longstr'".
var inequivalent = regexp.MustCompile(`inequivalent arg '([^']+)' for [^:]+: received (.+) but current is (.+)$`)

// valueOfType matches "the value 'v' of type 't'".
var valueOfType = regexp.MustCompile(`^the value '(.*)' of type '([a-z]+)'$`)

func argName(reason string) string {
	if m := inequivalent.FindStringSubmatch(reason); m != nil {
		return m[1]
	}
	return ""
}

// parseInequivalent returns the argument a 406 names and its current
// value, typed after the value's AMQP type or else after like (the value
// sent, which has the current value's type when RabbitMQ names no type).
func parseInequivalent(reason string, like any) (name string, current any, ok bool) {
	m := inequivalent.FindStringSubmatch(reason)
	if m == nil {
		return "", nil, false
	}
	name, cur := m[1], m[3]
	if name == "durable" {
		like = true
	}
	if cur == "none" {
		return name, nil, true
	}
	if t := valueOfType.FindStringSubmatch(cur); t != nil {
		switch t[2] {
		case "longstr":
			return name, t[1], true
		case "bool":
			b, err := strconv.ParseBool(t[1])
			return name, b, err == nil
		case "long", "signedint", "short", "byte", "unsignedint", "unsignedshort", "unsignedbyte":
			n, err := strconv.ParseInt(t[1], 10, 64)
			return name, n, err == nil
		}
		return name, t[1], true
	}
	v := strings.TrimSuffix(strings.TrimPrefix(cur, "'"), "'")
	switch like.(type) {
	case bool:
		b, err := strconv.ParseBool(v)
		return name, b, err == nil
	case int64, int32, int:
		n, err := strconv.ParseInt(v, 10, 64)
		return name, n, err == nil
	}
	return name, v, true
}

// maps copies a table.
func maps(t amqp.Table) amqp.Table {
	out := make(amqp.Table, len(t)+1)
	for k, v := range t {
		out[k] = v
	}
	return out
}

// formatTable renders a table in key order: {a: 1, b: none}.
func formatTable(t amqp.Table) string {
	keys := make([]string, 0, len(t))
	for k := range t {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		v := "none"
		if t[k] != nil {
			v = fmt.Sprint(t[k])
		}
		parts[i] = k + ": " + v
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// fatal marks an error that reconnecting cannot fix: Run returns it.
type fatal struct{ err error }

func (f fatal) Error() string { return f.err.Error() }
func (f fatal) Unwrap() error { return f.err }

// refused makes an access refusal (403) fatal; other errors are retried.
func refused(err error) error {
	if code(err) == amqp.AccessRefused {
		return fatal{fmt.Errorf("inbox: rabbitmq refused access (check the user's permissions on the vhost): %w", err)}
	}
	return err
}

// code is an AMQP error's reply code, 0 for other errors.
// missing reports whether err is a 404 for a queue that does not exist:
// not one for a durable queue whose node is down or still starting ("home
// node … is down or inaccessible", as every durable queue is while a
// restarted node recovers them), which a retry helps.
func missing(err error) bool {
	var aerr *amqp.Error
	return errors.As(err, &aerr) && aerr.Code == amqp.NotFound && !strings.Contains(aerr.Reason, "is down or inaccessible")
}

func code(err error) int {
	var aerr *amqp.Error
	if errors.As(err, &aerr) {
		return aerr.Code
	}
	return 0
}
