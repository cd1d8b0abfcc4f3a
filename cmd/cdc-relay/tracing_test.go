package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestTracingSettings: --tracing (or CDC_RELAY_TRACING) or an explicit
// OTEL_TRACES_EXPORTER=otlp turns tracing on, OTEL_SDK_DISABLED=true and
// OTEL_TRACES_EXPORTER=none keep it off; bad OTEL_* values exit 2 naming
// the variable and what it accepts.
func TestTracingSettings(t *testing.T) {
	c, err := LoadConfig(required, env(nil), &bytes.Buffer{})
	if err != nil || c.Tracing {
		t.Fatalf("default: Tracing %v, %v; want false", c != nil && c.Tracing, err)
	}
	for _, args := range [][]string{append(append([]string(nil), required...), "--tracing"), required} {
		e := map[string]string{}
		if len(args) == len(required) {
			e["CDC_RELAY_TRACING"] = "true"
		}
		if c, err := LoadConfig(args, env(e), &bytes.Buffer{}); err != nil || !c.Tracing {
			t.Fatalf("%v %v: Tracing %v, %v; want true", args, e, c != nil && c.Tracing, err)
		}
	}
	for _, tc := range []struct {
		env  map[string]string
		want []string
	}{
		{map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, []string{"OTEL_EXPORTER_OTLP_PROTOCOL", `"http/json"`, "http/protobuf", "grpc"}},
		{map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "thrift"}, []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", `"thrift"`, "http/protobuf", "grpc"}},
		{map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, []string{"OTEL_TRACES_EXPORTER", `"zipkin"`, "otlp or none"}},
		{map[string]string{"OTEL_TRACES_SAMPLER": "sometimes"}, []string{"OTEL_TRACES_SAMPLER", `"sometimes"`, "parentbased_always_on"}},
	} {
		e := map[string]string{"GOMEMLIMIT": "1GiB"} // keep the test process's own limit
		for k, v := range tc.env {
			e[k] = v
		}
		var stdout, stderr bytes.Buffer
		code := run([]string{"run", "--pg-url", "postgres://u@127.0.0.1:1/db", "--kafka-brokers", "127.0.0.1:1", "--value-format", "json", "--tracing"}, env(e), &stdout, &stderr)
		if code != exitConfig {
			t.Errorf("env %v: exit %d, want %d; stderr:\n%s", tc.env, code, exitConfig, stderr.String())
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(stderr.String(), w) {
				t.Errorf("env %v: stderr does not say %q:\n%s", tc.env, w, stderr.String())
			}
		}
	}
}
