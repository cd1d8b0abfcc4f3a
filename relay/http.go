package relay

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/cdc-relay/cdc-relay/replication"
)

// HTTPServer serves /metrics, /healthz and /readyz. /healthz is liveness:
// 200 while the process lives, whatever /readyz says, so that a probe never
// restarts a relay that waits for Kafka (degraded) or for a promotion.
type HTTPServer struct {
	srv *http.Server
	ln  net.Listener
}

// NewHTTPServer listens on addr and serves /metrics, /healthz and /readyz
// until Shutdown.
func NewHTTPServer(addr string, m *Metrics, stats *replication.Stats, readTimeout time.Duration, log *slog.Logger) (*HTTPServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		state := stats.State()
		last := stats.LastMessage()
		degraded := m.ready.degraded(time.Now())
		switch {
		case state == replication.StateHalted:
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not ready", "state": state.String(), "reason": "halted: " + Redact(stats.HaltCause())})
		case state == replication.StateWaiting:
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"state": state.String(), "reason": "standby: waiting for promotion"})
		case state == replication.StateReconnecting && stats.LastReconnectCause() == "checkpoint":
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not ready", "state": state.String(),
				"reason": "waiting for " + m.ready.broker.String() + ": " + m.ready.broker.Checkpoints() + " cannot be read, so a lost slot cannot be told from a first start; nothing is created meanwhile (see the log and cdc_relay_reconnects_total{cause=\"checkpoint\"})"})
		case state == replication.StateReconnecting:
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not ready", "state": state.String(),
				"reason": "reconnecting to PostgreSQL after an error (cause: " + stats.LastReconnectCause() + "; hosts tried: " +
					strings.Join(stats.Hosts(), ", ") + "; see the log and cdc_relay_reconnects_total)"})
		case state != replication.StateStreaming:
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not ready", "state": state.String(), "reason": notReadyReasons[state]})
		case degraded != "":
			// Kafka is the problem, whatever else follows from it (a reader
			// blocked on in-flight room reads nothing from PostgreSQL).
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not ready", "state": "degraded", "reason": degraded})
		case time.Since(last) > readTimeout:
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not ready", "state": state.String(), "reason": "no message from PostgreSQL within the read timeout"})
		default:
			writeJSON(w, http.StatusOK, map[string]string{"status": "ready", "state": state.String(), "reason": "streaming; last message from PostgreSQL " + time.Since(last).Round(time.Millisecond).String() + " ago"})
		}
	})
	s := &HTTPServer{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}, ln: ln}
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server stopped", "err", err.Error())
		}
	}()
	return s, nil
}

// notReadyReasons explain /readyz's 503 in the states without a cause of
// their own.
var notReadyReasons = map[replication.State]string{
	replication.StateStarting: "connecting to PostgreSQL",
	replication.StateStandby:  "standby: another instance holds the slot",
	replication.StateStopped:  "shutting down",
}

// Shutdown stops the server, waiting at most 5 s for requests in progress.
func (s *HTTPServer) Shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.srv.Shutdown(ctx)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

// Addr is the address the server listens on.
func (s *HTTPServer) Addr() net.Addr { return s.ln.Addr() }
