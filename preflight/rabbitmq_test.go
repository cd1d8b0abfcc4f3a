package preflight

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/cdc-relay/cdc-relay/checkpoint"
	"github.com/cdc-relay/cdc-relay/internal/rabbittest"
	"github.com/cdc-relay/cdc-relay/internal/testca"
	"github.com/cdc-relay/cdc-relay/rabbitmq"
)

// TestCheckRabbitMQ: check's RabbitMQ lines against a real node with an
// amqps listener: a fresh vhost, an exchange and streams that fit, ones
// that do not, users without configure or write permission, and
// connections that fail for each reason.
func TestCheckRabbitMQ(t *testing.T) {
	ca := testca.New(t)
	n := rabbittest.Own(t, rabbittest.Options{TLS: rabbittest.TLSFilesOf(t, ca)})
	ctl := func(args ...string) {
		t.Helper()
		if _, err := n.Ctl(args...); err != nil {
			t.Fatal(err)
		}
	}
	ctl("add_user", "nowrite", "pw")
	ctl("set_permissions", "-p", "/", "nowrite", ".*", "^$", ".*")
	ctl("add_user", "noconf", "pw")
	ctl("set_permissions", "-p", "/", "noconf", "^$", ".*", ".*")
	ctl("add_user", "novhost", "pw")
	userURL := func(user string) string {
		return "amqp://" + user + ":pw@127.0.0.1:" + strconv.Itoa(n.Port()) + "/"
	}

	conn, err := amqp.Dial(n.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	declare := func(f func(ch *amqp.Channel) error) {
		t.Helper()
		ch, err := conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		defer ch.Close()
		if err := f(ch); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ckpt := rabbitmq.CheckpointConfig{URL: n.URL(), Name: "ckpt-ok"}
	store := rabbitmq.NewCheckpointStore(ckpt)
	defer store.Close()
	if _, err := store.Ensure(ctx, true); err != nil {
		t.Fatal(err)
	}
	rec := &checkpoint.Record{Kind: checkpoint.KindCheckpoint, RelayID: "r1", Format: checkpoint.FormatFollows, LSN: "0/10", Timeline: 1,
		SystemID: "1", Database: "app", Slot: "s", Publication: "p", Version: "test", WrittenAt: time.Now().UTC()}
	if err := store.Write(ctx, rec); err != nil {
		t.Fatal(err)
	}
	declare(func(ch *amqp.Channel) error {
		return ch.ExchangeDeclare("ok-ex", amqp.ExchangeTopic, true, false, false, false, nil)
	})
	declare(func(ch *amqp.Channel) error {
		return ch.ExchangeDeclare("direct-ex", amqp.ExchangeDirect, true, false, false, false, nil)
	})
	declare(func(ch *amqp.Channel) error {
		return ch.ExchangeDeclare("transient-ex", amqp.ExchangeTopic, false, false, false, false, nil)
	})
	declare(func(ch *amqp.Channel) error {
		_, err := ch.QueueDeclare("dlq-ok", true, false, false, false, amqp.Table{"x-queue-type": "stream", "x-max-length-bytes": int64(1 << 20)})
		return err
	})
	declare(func(ch *amqp.Channel) error {
		_, err := ch.QueueDeclare("dlq-classic", true, false, false, false, amqp.Table{"x-queue-type": "classic"})
		return err
	})
	// A checkpoint stream of relay r2 declared with other retention.
	other := rabbitmq.NewCheckpointStore(rabbitmq.CheckpointConfig{URL: n.URL(), Name: "ckpt-ok", MaxBytes: 1 << 20})
	defer other.Close()
	if err := other.Write(ctx, &checkpoint.Record{Kind: checkpoint.KindCheckpoint, RelayID: "r2", Format: checkpoint.FormatFollows, LSN: "0/10", Timeline: 1,
		SystemID: "1", Database: "app", Slot: "s", Publication: "p", Version: "test", WrittenAt: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.PEM)
	wrongCA := testca.New(t)
	wrong := x509.NewCertPool()
	wrong.AppendCertsFromPEM(wrongCA.PEM)

	base := RabbitMQConfig{URL: n.URL(), Exchange: "ok-ex", Declare: true, RoutingKey: "{event_type}", Checkpoints: ckpt, RelayID: "r1", DLQStream: "dlq-ok"}
	for _, c := range []struct {
		name   string
		edit   func(*RabbitMQConfig)
		failed int
		want   []string
	}{
		{"all fits", func(*RabbitMQConfig) {}, 0, []string{
			"ok    RabbitMQ: connected to amqp://guest:xxxxx@127.0.0.1:",
			"ok    RabbitMQ: exchange ok-ex is a durable topic exchange",
			"ok    RabbitMQ: the user may publish to exchange ok-ex (write permission",
			"ok    RabbitMQ: the user may publish to the default exchange",
			"ok    RabbitMQ: checkpoint stream (checkpoints of this relay) " + store.Streams("r1")[0].Name + " is a stream the user may read, with the relay's arguments",
			"ok    RabbitMQ: checkpoint stream (gaps) ckpt-ok.gaps is a stream the user may read, with the relay's arguments",
			"ok    RabbitMQ: checkpoint stream (relay directory) ckpt-ok.relays is a stream",
			"ok    RabbitMQ: dead-letter stream dlq-ok is a stream the user may read\n",
			"WARN  RabbitMQ: exchange ok-ex: AMQP 0-9-1 cannot list an exchange's bindings",
			"--routing-key {event_type} is not verified",
		}},
		{"fresh vhost", func(c *RabbitMQConfig) { c.Exchange, c.Checkpoints.Name, c.DLQStream = "new-ex", "ckpt-new", "dlq-new" }, 0, []string{
			"ok    RabbitMQ: exchange new-ex does not exist yet: the relay declares it as a durable topic exchange",
			"ok    RabbitMQ: checkpoint stream (gaps) ckpt-new.gaps does not exist yet: the relay declares it",
			"ok    RabbitMQ: dead-letter stream dlq-new does not exist yet",
		}},
		{"not declared", func(c *RabbitMQConfig) { c.Exchange, c.Declare = "new-ex", false }, 1, []string{
			"FAIL  RabbitMQ: exchange new-ex does not exist, and with --rabbitmq-declare=false the relay does not declare it",
		}},
		{"direct exchange", func(c *RabbitMQConfig) { c.Exchange = "direct-ex" }, 1, []string{
			"FAIL  RabbitMQ: exchange direct-ex is not a durable topic exchange (Exception (406) Reason: \"PRECONDITION_FAILED - inequivalent arg 'type'",
		}},
		{"transient exchange", func(c *RabbitMQConfig) { c.Exchange = "transient-ex" }, 1, []string{
			"FAIL  RabbitMQ: exchange transient-ex is not a durable topic exchange (Exception (406) Reason: \"PRECONDITION_FAILED - inequivalent arg 'durable'",
		}},
		{"classic dlq, other retention", func(c *RabbitMQConfig) { c.DLQStream, c.RelayID = "dlq-classic", "r2" }, 2, []string{
			"FAIL  RabbitMQ: dead-letter stream dlq-classic is not a stream",
			"FAIL  RabbitMQ: checkpoint stream (checkpoints of this relay) " + store.Streams("r2")[0].Name + " has other arguments than the relay declares it with",
		}},
		{"no write", func(c *RabbitMQConfig) { c.URL = userURL("nowrite") }, 2, []string{
			"FAIL  RabbitMQ: the user may not publish to exchange ok-ex: grant write permission",
			"FAIL  RabbitMQ: the user may not publish to the default exchange",
		}},
		{"no configure, declare", func(c *RabbitMQConfig) { c.URL = userURL("noconf") }, 1, []string{
			"FAIL  RabbitMQ: the user may not configure exchange ok-ex, which the relay declares at its start",
			"WARN  RabbitMQ: the user's write permission on exchange ok-ex is not verified",
			"WARN  RabbitMQ: the user's write permission on the default exchange (the streams are written through it) is not verified",
			"WARN  RabbitMQ: checkpoint stream (gaps) ckpt-ok.gaps is a stream the user may read; its arguments are not verified",
		}},
		{"no configure, not declared", func(c *RabbitMQConfig) { c.URL, c.Declare = userURL("noconf"), false }, 0, []string{
			"WARN  RabbitMQ: exchange ok-ex exists; its type and durability are not verified",
		}},
		{"bad password", func(c *RabbitMQConfig) { c.URL = strings.Replace(userURL("nowrite"), ":pw@", ":wrong@", 1) }, 1, []string{
			`FAIL  RabbitMQ: the broker at 127.0.0.1:` + strconv.Itoa(n.Port()) + ` refused the credentials of user "nowrite"`,
		}},
		{"no vhost access", func(c *RabbitMQConfig) { c.URL = userURL("novhost") }, 1, []string{
			`FAIL  RabbitMQ: user "novhost" may not use vhost "/"`,
		}},
		{"unreachable", func(c *RabbitMQConfig) { c.URL = "amqp://guest:guest@127.0.0.1:1/" }, 1, []string{
			"FAIL  RabbitMQ: nothing listens at 127.0.0.1:1 (connection refused)",
		}},
		{"amqps trusted", func(c *RabbitMQConfig) { c.URL, c.TLS = n.AMQPSURL(), &tls.Config{RootCAs: roots} }, 0, []string{
			"ok    RabbitMQ: connected to amqps://guest:xxxxx@localhost:",
		}},
		{"amqps untrusted", func(c *RabbitMQConfig) { c.URL, c.TLS = n.AMQPSURL(), &tls.Config{RootCAs: wrong} }, 1, []string{
			"FAIL  RabbitMQ: the TLS certificate of localhost:",
			"is not trusted",
		}},
		{"amqps to a plain port", func(c *RabbitMQConfig) {
			c.URL, c.TLS = strings.Replace(n.URL(), "amqp://", "amqps://", 1), &tls.Config{RootCAs: roots}
		}, 1, []string{
			"does not speak TLS",
		}},
		{"amqp to the TLS port", func(c *RabbitMQConfig) { c.URL = strings.Replace(n.AMQPSURL(), "amqps://", "amqp://", 1) }, 1, []string{
			"is it a TLS port (use amqps://)?",
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := base
			c.edit(&cfg)
			var out bytes.Buffer
			failed := RabbitMQ(ctx, cfg, &out)
			if failed != c.failed {
				t.Errorf("failed %d, want %d", failed, c.failed)
			}
			for _, w := range c.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("no %q in:\n%s", w, out.String())
				}
			}
			if strings.Contains(out.String(), ":pw@") || strings.Contains(out.String(), "guest:guest") {
				t.Errorf("a password in the output:\n%s", out.String())
			}
		})
	}
	// Check left nothing behind.
	for _, what := range []string{"list_exchanges", "list_queues"} {
		out, err := n.Ctl("-q", what, "name")
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(out, "check-") || strings.Contains(out, "new-ex") || strings.Contains(out, "ckpt-new") {
			t.Errorf("%s after check:\n%s", what, out)
		}
	}
}
