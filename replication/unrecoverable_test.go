package replication

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// refusingServer is a PostgreSQL server as far as a connection attempt
// sees one: it refuses TLS, as a server without ssl = on does, and answers
// every startup message with a FATAL error of the given SQLSTATE.
func refusingServer(t *testing.T, code, message string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				conn.SetDeadline(time.Now().Add(10 * time.Second))
				be := pgproto3.NewBackend(conn, conn)
				msg, err := be.ReceiveStartupMessage()
				if err != nil {
					return
				}
				if _, ok := msg.(*pgproto3.SSLRequest); ok {
					conn.Write([]byte("N"))
					if msg, err = be.ReceiveStartupMessage(); err != nil {
						return
					}
				}
				be.Send(&pgproto3.ErrorResponse{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: code, Message: message})
				be.Flush()
			}()
		}
	}()
	return l.Addr().String()
}

// closedAddr is an address where nothing listens.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func connectErr(t *testing.T, url string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgconn.Connect(ctx, url)
	if err == nil {
		conn.Close(ctx)
		t.Fatalf("connect to %s succeeded", url)
	}
	return err
}

func TestConnectCauseRootCauseFirst(t *testing.T) {
	auth := refusingServer(t, "28P01", `password authentication failed for user "relay"`)
	limit := refusingServer(t, "53300", `too many connections for role "relay"`)
	noHBA := refusingServer(t, "28000", `no pg_hba.conf entry for host "127.0.0.1", user "relay", database "app", no encryption`)
	noHBA2 := refusingServer(t, "28000", `no pg_hba.conf entry for host "127.0.0.1", user "relay", database "app", no encryption`)
	down := closedAddr(t)

	tests := []struct {
		name      string
		url       string
		wantFirst string // what the message begins with
		wantAlso  string // further on
		wantFatal string // Unrecoverable's Cause; "" for an error to retry
		wantFix   string
	}{
		{"wrong password behind a refused TLS attempt", "postgres://relay:secret@" + auth + "/app",
			auth + " (127.0.0.1): ", "SQLSTATE 28P01", `PostgreSQL answered: password authentication failed for user "relay" (SQLSTATE 28P01)`, "check the password in --pg-url"},
		{"a limit a retry may pass", "postgres://relay@" + limit + "/app",
			limit + " (127.0.0.1): server error: FATAL: too many connections", "(user=relay database=app)", "", ""},
		{"pg_hba.conf of the only host", "postgres://relay@" + noHBA + "/app?sslmode=disable",
			noHBA + " (127.0.0.1): server error: FATAL: no pg_hba.conf entry", "", `PostgreSQL answered: no pg_hba.conf entry for host "127.0.0.1", user "relay", database "app", no encryption (SQLSTATE 28000)`, "pg_hba.conf"},
		{"one host refuses, the other is down", "postgres://relay@" + down + "," + noHBA + "/app",
			noHBA + " (127.0.0.1): server error: FATAL: no pg_hba.conf entry", "; " + down + " (127.0.0.1): dial error", "", ""},
		{"every host refuses", "postgres://relay@" + noHBA + "," + noHBA2 + "/app",
			noHBA2 + " (127.0.0.1): server error", "; " + noHBA + " (127.0.0.1): server error", "PostgreSQL answered: no pg_hba.conf entry", "pg_hba.conf"},
		{"nothing listens", "postgres://relay@" + down + "/app",
			down + " (127.0.0.1): dial error", "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := connectError("connect", connectErr(t, tt.url))
			got := err.Error()
			if !strings.HasPrefix(got, "connect: "+tt.wantFirst) {
				t.Errorf("message\n%s\ndoes not begin with\nconnect: %s", got, tt.wantFirst)
			}
			if !strings.Contains(got, tt.wantAlso) {
				t.Errorf("message\n%s\nlacks %q", got, tt.wantAlso)
			}
			if strings.Contains(got, "tls error") || strings.Contains(got, "\n") || strings.Contains(got, "secret") {
				t.Errorf("message\n%s\nnames the TLS fallback, spans lines or holds the password", got)
			}
			var ce *pgconn.ConnectError
			if !errors.As(err, &ce) {
				t.Errorf("%T does not wrap *pgconn.ConnectError", err)
			}
			u := Unrecoverable(err, "", "")
			switch {
			case tt.wantFatal == "" && u != nil:
				t.Errorf("Unrecoverable = %q, want nil (retry)", u)
			case tt.wantFatal != "" && u == nil:
				t.Errorf("Unrecoverable = nil, want %q", tt.wantFatal)
			case u != nil && (!strings.HasPrefix(u.Cause, tt.wantFatal) || !strings.Contains(u.Fix, tt.wantFix)):
				t.Errorf("Unrecoverable = %q / %q, want %q / ...%q...", u.Cause, u.Fix, tt.wantFatal, tt.wantFix)
			}
		})
	}
}

func TestUnrecoverableQueryErrors(t *testing.T) {
	tests := []struct {
		err     error
		wantFix string // "" for an error to retry
	}{
		{fmt.Errorf("create slot s: %w", &pgconn.PgError{Severity: "ERROR", Code: "42501", Message: "must be superuser or replication role to use replication slots"}),
			"ALTER ROLE relay WITH REPLICATION"},
		{fmt.Errorf("create slot s: %w", &pgconn.PgError{Severity: "ERROR", Code: "42501", Message: "permission denied to use replication slots"}),
			"ALTER ROLE relay WITH REPLICATION"},
		{fmt.Errorf("create publication p: %w", &pgconn.PgError{Severity: "ERROR", Code: "42501", Message: "must be owner of table outbox"}),
			"CREATE PUBLICATION"},
		{fmt.Errorf("create publication p: %w", &pgconn.PgError{Severity: "ERROR", Code: "42501", Message: "permission denied for database app"}),
			"GRANT CREATE ON DATABASE app TO relay"},
		{fmt.Errorf("create slot s: %w", &pgconn.PgError{Severity: "ERROR", Code: "55000", Message: "logical decoding requires wal_level >= logical"}), ""},
		{fmt.Errorf("receive: %w", &net.OpError{Op: "read", Err: errors.New("connection reset by peer")}), ""},
		{fmt.Errorf("%w: %w", ErrWaitingPromotion, &pgconn.PgError{Code: "28000"}), "check the user"},
	}
	for _, tt := range tests {
		u := Unrecoverable(tt.err, "relay", "app")
		switch {
		case tt.wantFix == "" && u != nil:
			t.Errorf("%v: Unrecoverable = %q, want nil", tt.err, u)
		case tt.wantFix != "" && (u == nil || !strings.Contains(u.Fix, tt.wantFix)):
			t.Errorf("%v: Unrecoverable = %v, want a fix with %q", tt.err, u, tt.wantFix)
		}
	}
	// The stream never calls a standby's answer unrecoverable.
	s := NewStream(Config{URL: "postgres://relay@127.0.0.1/app"}, Deps{})
	if u := s.unrecoverable(tests[len(tests)-1].err); u != nil {
		t.Errorf("waiting for promotion: unrecoverable = %q, want nil", u)
	}
	if u := s.unrecoverable(tests[0].err); u == nil || !strings.Contains(u.Fix, "ALTER ROLE relay WITH REPLICATION") {
		t.Errorf("unrecoverable = %v, want the REPLICATION fix for the URL's user", u)
	}
}

func TestErrorKeyIgnoresNumbers(t *testing.T) {
	a := errors.New("receive: read tcp 127.0.0.1:40312->127.0.0.1:5432: read: connection reset by peer")
	b := errors.New("receive: read tcp 127.0.0.1:40988->127.0.0.1:5432: read: connection reset by peer")
	c := errors.New("receive: read tcp 127.0.0.1:40988->127.0.0.1:5432: i/o timeout")
	if errorKey("network", a) != errorKey("network", b) {
		t.Errorf("keys differ for one error on two local ports")
	}
	if errorKey("network", b) == errorKey("network", c) {
		t.Errorf("keys equal for two errors")
	}
}
