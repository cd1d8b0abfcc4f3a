package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cdc-relay/cdc-relay/internal/testca"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/internal/pgtest"
	"github.com/cdc-relay/cdc-relay/internal/testtier"
)

// writeOwned writes a file the PostgreSQL server (run as postgres) can read.
func writeOwned(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatal(err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(path, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPostgresTLSVerifyFull: the relay streams over TLS with sslmode=verify-full
// against a CA made in the test, and refuses a server its CA did not sign.
func TestPostgresTLSVerifyFull(t *testing.T) {
	t.Parallel()
	testtier.Need(t)
	ca := testca.New(t)
	cluster, err := pgtest.Start(pgtest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cluster.Close() })
	certPEM, keyPEM := ca.Issue(t, "localhost", "localhost", "127.0.0.1")
	writeOwned(t, filepath.Join(cluster.Dir(), "server.crt"), certPEM)
	writeOwned(t, filepath.Join(cluster.Dir(), "server.key"), keyPEM)
	ctx := context.Background()
	for _, sql := range []string{
		fmt.Sprintf("ALTER SYSTEM SET ssl_cert_file = '%s'", filepath.Join(cluster.Dir(), "server.crt")),
		fmt.Sprintf("ALTER SYSTEM SET ssl_key_file = '%s'", filepath.Join(cluster.Dir(), "server.key")),
		"ALTER SYSTEM SET ssl = on",
		"SELECT pg_reload_conf()",
	} {
		if err := cluster.Exec(ctx, "", sql); err != nil {
			t.Fatal(err)
		}
	}
	dbURL, err := cluster.CreateDatabase(ctx, "tlsdb")
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.PEM")
	os.WriteFile(caFile, ca.PEM, 0o644)
	tlsURL := strings.Replace(dbURL, "127.0.0.1", "localhost", 1)
	tlsURL = strings.Replace(tlsURL, "sslmode=disable", "sslmode=verify-full&sslrootcert="+caFile, 1)
	waitFor(t, 10*time.Second, "TLS on the server", func() bool {
		conn, err := pgx.Connect(ctx, tlsURL)
		if err != nil {
			return false
		}
		defer conn.Close(ctx)
		var on bool
		return conn.QueryRow(ctx, "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").Scan(&on) == nil && on
	})

	s := randSuffix()
	table := "outbox_" + s
	if err := cluster.Exec(ctx, "tlsdb", fmt.Sprintf(outboxDDL, "public."+table)); err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, name: s, table: table, slot: "slot_" + s, publication: "pub_" + s, topicPrefix: "t" + s, dlq: "t" + s + ".dlq"}
	args := f.args()
	setFlag(args, "--pg-url", tlsURL)
	c := consume(t, "^"+f.topicPrefix+`\..*`)
	r := startRelay(t, args)
	r.waitStreaming(60 * time.Second)

	conn, err := pgx.Connect(ctx, tlsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	agg := uuidFor(1)
	ids, err := f.insertTx(ctx, conn, []event{{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated", Payload: orderCreated(agg, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	c.waitIDs(60*time.Second, ids)
	// The replication connection itself is encrypted.
	var sslRepl bool
	if err := conn.QueryRow(ctx, `SELECT bool_and(s.ssl) FROM pg_stat_ssl s JOIN pg_stat_replication r ON r.pid = s.pid`).Scan(&sslRepl); err != nil || !sslRepl {
		t.Fatalf("replication connection not over TLS: %v %v", sslRepl, err)
	}
	r.terminate()

	// Another CA: verify-full must refuse the server, and say why.
	other := testca.New(t)
	otherFile := filepath.Join(t.TempDir(), "other.PEM")
	os.WriteFile(otherFile, other.PEM, 0o644)
	setFlag(args, "--pg-url", strings.Replace(tlsURL, caFile, otherFile, 1))
	r2 := startRelay(t, args)
	waitFor(t, 20*time.Second, "a certificate error", func() bool {
		return strings.Contains(r2.Output(), "certificate")
	})
	if v, _ := r2.metric("cdc_relay_active"); v != 0 {
		t.Fatalf("relay streams although the server certificate is not trusted")
	}
}

// TestRegistryTLSAndBasicAuth: the relay reaches the registry over https
// with basic auth (a TLS proxy with a certificate from a test CA, requiring
// a password, in front of the real registry); a wrong password stops it with
// the registry's answer and without printing the password.
func TestRegistryTLSAndBasicAuth(t *testing.T) {
	t.Parallel()
	testtier.Need(t)
	const user, pass = "relay", "reg-Pa55word"
	ca := testca.New(t)
	certPEM, keyPEM := ca.Issue(t, "localhost", "localhost", "127.0.0.1")
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	target, _ := url.Parse(registry.URL())
	proxy := httputil.NewSingleHostReverseProxy(target)
	var authed atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if !ok || u != user || p != pass {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"error_code": 401, "message": "Unauthorized"}`))
			return
		}
		authed.Add(1)
		proxy.ServeHTTP(w, r)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	caFile := filepath.Join(t.TempDir(), "ca.PEM")
	os.WriteFile(caFile, ca.PEM, 0o644)
	httpsURL := strings.Replace(srv.URL, "https://", "https://"+user+":"+pass+"@", 1)

	f := newFixture(t, "")
	args := f.args("--schema-registry-ca-file", caFile)
	setFlag(args, "--schema-registry-url", httpsURL)
	c := consume(t, "^"+f.topicPrefix+`\..*`)
	r := startRelay(t, args)
	r.waitStreaming(60 * time.Second)
	agg := uuidFor(6)
	ids, err := f.insertTx(context.Background(), connect(t), []event{{AggregateType: "Order", AggregateID: agg, EventType: "OrderCreated", Payload: orderCreated(agg, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	recs := c.waitIDs(60*time.Second, ids)
	if _, _, err := newAvroDecoder().decode(recs[0].Value); err != nil {
		t.Fatal(err)
	}
	if authed.Load() == 0 {
		t.Fatal("no authenticated request reached the registry proxy")
	}
	r.terminate()

	bad := f.args("--schema-registry-ca-file", caFile)
	setFlag(bad, "--schema-registry-url", strings.Replace(httpsURL, pass, "wrong-"+pass, 1))
	r2 := startRelay(t, bad)
	if code := r2.wait(60 * time.Second); code == 0 {
		t.Fatalf("relay with a wrong registry password exited 0")
	}
	out := r2.Output()
	if !strings.Contains(out, "401") || strings.Contains(out, pass) {
		t.Fatalf("want the 401 and no password in the output:\n%s", tailString(out, 2000))
	}
}
