package preflight

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"syscall"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/cdc-relay/cdc-relay/checkpoint"
	"github.com/cdc-relay/cdc-relay/rabbitmq"
	"github.com/cdc-relay/cdc-relay/relay"
)

// `cdc-relay check` with RabbitMQ: the connection, the exchange's type and
// durability, what the user may do in the vhost, and the checkpoint and
// dead-letter streams.
//
// AMQP 0-9-1 has no call that lists a user's permissions or an exchange's
// bindings, so check learns permissions by trying, on names of its own
// where a try could change something:
//   - configure: declaring the relay's exchange and streams again with the
//     relay's arguments, which changes nothing when they exist (and fails
//     with 406 when their type, durability or arguments differ), and a
//     temporary exchange and queue;
//   - write on the exchange: binding it to a temporary exchange (exchange.bind
//     needs write on its destination), never by publishing to it, since a
//     probe would reach the consumers of every queue bound with "#";
//   - write on the default exchange (how streams are written): a probe
//     message to a temporary exclusive queue of check's own;
//   - read on a stream: a consumer attached with x-stream-offset "next" and
//     cancelled, which reads nothing and consumes nothing.
//
// Whatever check creates is deleted before it returns, or goes with its
// connection.

// RabbitMQConfig is what check verifies of RabbitMQ.
type RabbitMQConfig struct {
	URL string      // amqp://… or amqps://… (--rabbitmq-url)
	TLS *tls.Config // for amqps; nil: the system roots
	// Exchange is the relay's exchange (--rabbitmq-exchange, default
	// outbox); Declare is --rabbitmq-declare (default true): the relay
	// declares it as a durable topic exchange.
	Exchange string
	Declare  bool
	// RoutingKey is the --routing-key template, named in the warning that
	// check cannot see the exchange's bindings.
	RoutingKey string
	// Checkpoints are the checkpoint store's settings (its Name, the
	// streams' prefix, and retention), RelayID the relay whose checkpoint
	// stream is checked ("": only the gaps and directory streams).
	Checkpoints rabbitmq.CheckpointConfig
	RelayID     string
	// DLQStream is the dead-letter stream; "": not checked.
	DLQStream string
}

// RabbitMQ runs the RabbitMQ checks of cfg, printing one line per check on
// out ("ok", "WARN", "FAIL" with the fix) and no verdict line, and
// returns how many failed.
func RabbitMQ(ctx context.Context, cfg RabbitMQConfig, out io.Writer) (failed int) {
	c := &checker{out: out}
	c.rabbitmq(ctx, cfg)
	return c.failed
}

// rabbitCheck is one run of the RabbitMQ checks.
type rabbitCheck struct {
	*checker
	cfg  RabbitMQConfig
	conn *amqp.Connection
	tag  string // names check's temporary exchange and queue
	// configure is false once a declare was refused for want of configure
	// permission.
	configure bool
}

func (c *checker) rabbitmq(ctx context.Context, cfg RabbitMQConfig) {
	if cfg.Exchange == "" {
		cfg.Exchange = "outbox"
	}
	conn, err := rabbitmq.Dial(cfg.URL, cfg.TLS, "cdc-relay check")
	if err != nil {
		c.fail("RabbitMQ: %s", dialProblem(cfg.URL, err))
		return
	}
	defer conn.Close()
	version, _ := conn.Properties["version"].(string)
	c.ok("RabbitMQ: connected to %s (RabbitMQ %s)", relay.Redact(cfg.URL), version)
	var id [4]byte
	rand.Read(id[:])
	r := &rabbitCheck{checker: c, cfg: cfg, conn: conn, tag: "check-" + hex.EncodeToString(id[:]), configure: true}
	if r.exchange() {
		r.exchangeWrite()
	}
	r.defaultExchangeWrite()
	if cfg.Checkpoints.Name == "" {
		c.warn("RabbitMQ: no checkpoint stream name given: the checkpoint streams were not checked")
	}
	store := rabbitmq.NewCheckpointStore(cfg.Checkpoints)
	for _, s := range store.Streams(cfg.RelayID) {
		if cfg.Checkpoints.Name == "" {
			break
		}
		if cfg.RelayID == "" && strings.Contains(s.Name, ".relay.") {
			c.warn("RabbitMQ: no relay id given: the checkpoint stream of this relay (%s.relay.<hash of the relay id>) was not checked", cfg.Checkpoints.Name)
			continue
		}
		r.stream(s.Name, "checkpoint stream ("+s.Role+")", s.Args)
	}
	if cfg.DLQStream != "" {
		r.stream(cfg.DLQStream, "dead-letter stream", nil)
	}
	c.warn("RabbitMQ: exchange %s: AMQP 0-9-1 cannot list an exchange's bindings, and check publishes nothing to it (a probe would reach every queue bound with #), so whether a queue is bound for each routing key of --routing-key %s is not verified; the relay publishes with mandatory, and an event no queue is bound for comes back and goes to the dead-letter stream with error_kind unroutable: list the bindings with rabbitmqctl list_bindings source_name routing_key destination_name",
		cfg.Exchange, cfg.RoutingKey)
}

// do runs f on a channel of its own: an error the broker answers closes
// the channel it was on.
func (r *rabbitCheck) do(f func(ch *amqp.Channel) error) error {
	ch, err := r.conn.Channel()
	if err != nil {
		return err
	}
	defer ch.Close()
	return f(ch)
}

// refused reports whether err is a 403 ACCESS_REFUSED about name.
func refused(err error, kind, name string) bool {
	var aerr *amqp.Error
	return errors.As(err, &aerr) && aerr.Code == amqp.AccessRefused && strings.Contains(aerr.Reason, kind+" '"+name+"'")
}

// exchange checks that the exchange exists as a durable topic exchange
// and reports whether it exists.
func (r *rabbitCheck) exchange() bool {
	ex := r.cfg.Exchange
	err := r.do(func(ch *amqp.Channel) error {
		return ch.ExchangeDeclarePassive(ex, amqp.ExchangeTopic, true, false, false, false, nil)
	})
	switch {
	case rabbitmq.AMQPCode(err) == amqp.NotFound && r.cfg.Declare:
		r.ok("RabbitMQ: exchange %s does not exist yet: the relay declares it as a durable topic exchange at its start (which needs configure permission on it)", ex)
		return false
	case rabbitmq.AMQPCode(err) == amqp.NotFound:
		r.fail("RabbitMQ: exchange %s does not exist, and with --rabbitmq-declare=false the relay does not declare it: declare it as a durable topic exchange (rabbitmqadmin declare exchange name=%s type=topic durable=true), or let the relay declare it", ex, ex)
		return false
	case err != nil:
		r.fail("RabbitMQ: exchange %s: %v", ex, err)
		return false
	}
	// It exists: declaring it again with the relay's arguments changes
	// nothing, and answers 406 when its type or durability differ.
	err = r.do(func(ch *amqp.Channel) error {
		return ch.ExchangeDeclare(ex, amqp.ExchangeTopic, true, false, false, false, nil)
	})
	switch {
	case err == nil:
		r.ok("RabbitMQ: exchange %s is a durable topic exchange", ex)
	case rabbitmq.AMQPCode(err) == amqp.PreconditionFailed:
		r.fail("RabbitMQ: exchange %s is not a durable topic exchange (%v): the relay's declare fails; delete it and let the relay declare it, or name another with --rabbitmq-exchange", ex, err)
	case refused(err, "exchange", ex) && r.cfg.Declare:
		r.configure = false
		r.fail("RabbitMQ: the user may not configure exchange %s, which the relay declares at its start: grant configure permission on it (rabbitmqctl set_permissions), or declare it beforehand and set --rabbitmq-declare=false", ex)
	case refused(err, "exchange", ex):
		r.configure = false
		r.warn("RabbitMQ: exchange %s exists; its type and durability are not verified: a passive declare does not tell them and the user may not configure it (--rabbitmq-declare=false); it must be a durable topic exchange (rabbitmqctl list_exchanges name type durable)", ex)
	default:
		r.fail("RabbitMQ: declare exchange %s: %v", ex, err)
	}
	return true
}

// exchangeWrite checks write permission on the exchange by binding it to
// a temporary exchange, which nothing publishes to.
func (r *rabbitCheck) exchangeWrite() {
	ex := r.cfg.Exchange
	tmp := ex + "." + r.tag
	err := r.do(func(ch *amqp.Channel) error {
		return ch.ExchangeDeclare(tmp, amqp.ExchangeDirect, false, false, false, false, nil)
	})
	if err != nil {
		r.warn("RabbitMQ: the user's write permission on exchange %s is not verified: check would bind it to a temporary exchange %s, which the user may not declare (%v); the relay publishes to %s and needs write permission on it", ex, tmp, err, ex)
		return
	}
	defer r.do(func(ch *amqp.Channel) error { return ch.ExchangeDelete(tmp, false, false) })
	err = r.do(func(ch *amqp.Channel) error { return ch.ExchangeBind(ex, r.tag, tmp, false, nil) })
	switch {
	case err == nil:
		r.ok("RabbitMQ: the user may publish to exchange %s (write permission, verified with a binding from a temporary exchange, not a message; topic permissions per routing key are not verified)", ex)
	case refused(err, "exchange", ex):
		r.fail("RabbitMQ: the user may not publish to exchange %s: grant write permission on it (rabbitmqctl set_permissions)", ex)
	default:
		r.warn("RabbitMQ: the user's write permission on exchange %s is not verified: binding it to the temporary exchange %s failed: %v", ex, tmp, err)
	}
}

// defaultExchangeWrite checks that the user may publish to the default
// exchange, through which the streams are written, with a message to a
// queue of check's own.
func (r *rabbitCheck) defaultExchangeWrite() {
	q := "cdc-relay." + r.tag
	if r.cfg.Checkpoints.Name != "" {
		q = r.cfg.Checkpoints.Name + "." + r.tag
	}
	err := r.do(func(ch *amqp.Channel) error {
		if _, err := ch.QueueDeclare(q, false, true, true, false, amqp.Table{"x-queue-type": "classic"}); err != nil {
			return err
		}
		defer ch.QueueDelete(q, false, false, false)
		c, err := rabbitmq.NewConfirmer(r.conn)
		if err != nil {
			return err
		}
		defer c.Close()
		fates, err := c.Publish(context.Background(), []rabbitmq.Outgoing{{RoutingKey: q, Publishing: amqp.Publishing{MessageId: r.tag, Type: "cdc-relay check"}}})
		if err == nil {
			err = fates[0]
		}
		return err
	})
	switch {
	case err == nil:
		r.ok("RabbitMQ: the user may publish to the default exchange, through which the checkpoint and dead-letter streams are written (verified with a message to a temporary queue of check's own)")
	case refused(err, "queue", q):
		r.warn("RabbitMQ: the user's write permission on the default exchange (the streams are written through it) is not verified: it may not declare check's temporary queue %s", q)
	case refused(err, "exchange", "amq.default"):
		r.fail("RabbitMQ: the user may not publish to the default exchange, through which the checkpoint and dead-letter streams are written: grant write permission on amq.default")
	default:
		r.fail("RabbitMQ: publish to a temporary queue through the default exchange: %v", err)
	}
}

// stream checks a stream: that it is one, that the user may read it, and,
// with args, that it has the arguments the relay declares it with.
func (r *rabbitCheck) stream(name, what string, args amqp.Table) {
	err := r.do(func(ch *amqp.Channel) error {
		if err := ch.Qos(1, 0, false); err != nil {
			return err
		}
		if _, err := ch.Consume(name, r.tag, false, false, false, false, amqp.Table{rabbitmq.OffsetHeader: "next"}); err != nil {
			return err
		}
		return ch.Cancel(r.tag, false)
	})
	switch {
	case rabbitmq.Absent(err):
		r.fail("RabbitMQ: %s %s exists, but the node it is on is down or still starting (%v): run check again once the node is up", what, name, err)
		return
	case rabbitmq.AMQPCode(err) == amqp.NotFound:
		if r.configure {
			r.ok("RabbitMQ: %s %s does not exist yet: the relay declares it (which needs configure permission on it)", what, name)
		} else {
			r.warn("RabbitMQ: %s %s does not exist yet, and the user may not configure what the relay declares: grant configure permission on it, or declare it as a durable stream (x-queue-type stream)", what, name)
		}
		return
	case rabbitmq.AMQPCode(err) == amqp.PreconditionFailed:
		r.fail("RabbitMQ: %s %s is not a stream (%v): the relay reads it without consuming it, which only a stream allows; delete it and let the relay declare it", what, name, err)
		return
	case refused(err, "queue", name):
		r.fail("RabbitMQ: the user may not read %s %s: grant read permission on it", what, name)
		return
	case err != nil:
		r.fail("RabbitMQ: %s %s: %v", what, name, err)
		return
	}
	if args == nil {
		r.ok("RabbitMQ: %s %s is a stream the user may read", what, name)
		return
	}
	err = r.do(func(ch *amqp.Channel) error {
		_, err := ch.QueueDeclare(name, true, false, false, false, args)
		return err
	})
	switch {
	case err == nil:
		r.ok("RabbitMQ: %s %s is a stream the user may read, with the relay's arguments", what, name)
	case rabbitmq.AMQPCode(err) == amqp.PreconditionFailed:
		r.fail("RabbitMQ: %s %s has other arguments than the relay declares it with (%v): the relay's declare fails", what, name, err)
	case refused(err, "queue", name):
		r.configure = false
		r.warn("RabbitMQ: %s %s is a stream the user may read; its arguments are not verified: the user may not configure it", what, name)
	default:
		r.fail("RabbitMQ: declare %s %s: %v", what, name, err)
	}
}

// dialProblem says why a connection failed and what to fix.
func dialProblem(rawURL string, err error) string {
	host, user, vhost := "", "", "/"
	if u, perr := url.Parse(rawURL); perr == nil {
		host, user = u.Host, u.User.Username()
		if p := strings.TrimPrefix(u.Path, "/"); p != "" {
			vhost, _ = url.PathUnescape(p)
		}
	}
	var aerr *amqp.Error
	var unknownCA x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var verr *tls.CertificateVerificationError
	var recErr tls.RecordHeaderError
	var opErr *net.OpError
	var dnsErr *net.DNSError
	switch {
	case errors.As(err, &aerr) && aerr.Code == amqp.AccessRefused:
		return fmt.Sprintf("the broker at %s refused the credentials of user %q (%s): check the user and password in --rabbitmq-url", host, user, aerr.Reason)
	case errors.As(err, &aerr) && aerr.Code == amqp.NotAllowed:
		return fmt.Sprintf("user %q may not use vhost %q at %s (%s): check the vhost in --rabbitmq-url, or grant access (rabbitmqctl set_permissions -p %s)", user, vhost, host, aerr.Reason, vhost)
	case errors.As(err, &aerr) && aerr.Code == amqp.FrameError:
		return fmt.Sprintf("%s answered with what is not AMQP (%s): is it a TLS port (use amqps://)?", host, aerr.Reason)
	case errors.As(err, &unknownCA), errors.As(err, &verr):
		return fmt.Sprintf("the TLS certificate of %s is not trusted (%v): give the CA that signed it, or check the host", host, err)
	case errors.As(err, &hostErr):
		return fmt.Sprintf("the TLS certificate of %s is not for that host name (%v): connect by a name the certificate holds", host, err)
	case errors.As(err, &recErr):
		return fmt.Sprintf("%s does not speak TLS (%v): use amqp:// for a plain port, or the port of the amqps listener (5671 by default)", host, err)
	case errors.As(err, &dnsErr):
		return fmt.Sprintf("cannot resolve the host of %s (%v): check --rabbitmq-url", host, err)
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Sprintf("nothing listens at %s (connection refused): check the host and port in --rabbitmq-url, and that RabbitMQ runs", host)
	case errors.As(err, &opErr):
		return fmt.Sprintf("cannot reach %s (%v): check the host and port in --rabbitmq-url and the network", host, err)
	case errors.Is(err, io.EOF), errors.Is(err, amqp.ErrSASL), errors.Is(err, syscall.ECONNRESET):
		return fmt.Sprintf("%s closed the connection during the AMQP handshake (%v): is it a TLS port (use amqps://), or is it not RabbitMQ?", host, err)
	}
	return fmt.Sprintf("cannot connect to %s: %v", host, err)
}

// relayID is the relay id run would use: --relay-id, else the one made of
// the server c identified and --slot; "" when neither is known.
func (c *checker) relayID(cfg *relay.Config) string {
	switch {
	case cfg.RelayID != "":
		return cfg.RelayID
	case c.server != nil:
		return checkpoint.DefaultRelayID(*c.server, cfg.Slot)
	}
	return ""
}
