package replication

import (
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Connection timeouts. A blackholed path to PostgreSQL (packets dropped,
// socket left open) must fail every step in bounded time, or the relay
// would hang instead of reconnecting:
//
//   - connecting (dial, TLS, startup, authentication) is bounded by
//     ConnectTimeout: connect_timeout from --pg-url, else connectTimeout;
//   - the catalog queries and START_REPLICATION that follow are bounded by
//     setupTimeout (creating a new slot is not: it waits for running
//     transactions to end, however long they take);
//   - a streaming connection is bounded by the read timeout;
//   - under all of these, TCP keepalive probes and TCP_USER_TIMEOUT (Linux)
//     make the kernel give up on a peer that stopped acknowledging.
const (
	connectTimeout = 10 * time.Second
	setupTimeout   = 30 * time.Second

	keepAliveIdle     = 10 * time.Second
	keepAliveInterval = 5 * time.Second
	keepAliveCount    = 3
	// tcpUserTimeout bounds how long sent data may stay unacknowledged.
	tcpUserTimeout = 30 * time.Second
)

// AppName is the application_name the relay's connections use unless the
// URL sets one, so they are easy to find in pg_stat_activity.
const AppName = "cdc-relay"

// configureConn sets what every relay connection needs: an application_name,
// a connect timeout and a dialer with TCP keepalive and a user timeout.
func configureConn(cfg *pgconn.Config) {
	if cfg.RuntimeParams["application_name"] == "" {
		cfg.RuntimeParams["application_name"] = AppName
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = connectTimeout
	}
	d := &net.Dialer{
		Timeout: cfg.ConnectTimeout,
		KeepAliveConfig: net.KeepAliveConfig{
			Enable:   true,
			Idle:     keepAliveIdle,
			Interval: keepAliveInterval,
			Count:    keepAliveCount,
		},
		Control: userTimeoutControl(tcpUserTimeout),
	}
	cfg.DialFunc = d.DialContext
}

// Hosts returns the host:port pairs of a libpq URL or DSN, in the order a
// connection tries them (a multi-host URL lists several); nil when the URL
// does not parse.
func Hosts(url string) []string {
	cfg, err := pgconn.ParseConfig(url)
	if err != nil {
		return nil
	}
	hosts := []string{net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))}
	for _, fb := range cfg.Fallbacks {
		h := net.JoinHostPort(fb.Host, strconv.Itoa(int(fb.Port)))
		if !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	return hosts
}
