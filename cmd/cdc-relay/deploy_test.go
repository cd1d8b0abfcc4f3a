package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/cdc-relay/cdc-relay/internal/config"
	relaypkg "github.com/cdc-relay/cdc-relay/relay"
	"github.com/cdc-relay/cdc-relay/replication"
)

// The deployment files must agree with the code: probe paths, ports, flag
// env names and metric names. These tests keep them from drifting.

func yamlDocs(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var docs []map[string]any
	for {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if doc != nil {
			docs = append(docs, doc)
		}
	}
}

// dig walks maps and lists: keys are map keys or list indexes.
func dig(v any, path ...string) any {
	for _, p := range path {
		switch x := v.(type) {
		case map[string]any:
			v = x[p]
		case []any:
			i, err := strconv.Atoi(p)
			if err != nil || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

// relayMetricNames are the metric families the relay exports.
func relayMetricNames(t *testing.T) map[string]bool {
	t.Helper()
	names, err := relaypkg.MetricNames()
	if err != nil {
		t.Fatal(err)
	}
	return names
}

var metricRef = regexp.MustCompile(`cdc_relay_[a-z_]+`)

func checkMetricRefs(t *testing.T, where, text string, known map[string]bool) int {
	t.Helper()
	n := 0
	for _, ref := range metricRef.FindAllString(text, -1) {
		name := ref
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base := strings.TrimSuffix(ref, suffix); base != ref && known[base] {
				name = base
			}
		}
		if !known[name] {
			t.Errorf("%s uses metric %s, which the relay does not export", where, ref)
		}
		n++
	}
	return n
}

func TestKubernetesManifests(t *testing.T) {
	dir := "../../deploy/k8s"
	var deployment, service map[string]any
	kinds := map[string]bool{}
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if len(files) == 0 {
		t.Fatal("no manifests in deploy/k8s")
	}
	for _, f := range files {
		for _, doc := range yamlDocs(t, f) {
			kind, _ := doc["kind"].(string)
			kinds[kind] = true
			switch kind {
			case "Deployment":
				deployment = doc
			case "Service":
				service = doc
			}
		}
	}
	for _, k := range []string{"Deployment", "PodDisruptionBudget", "ConfigMap", "Secret", "Service", "ServiceMonitor", "PrometheusRule"} {
		if !kinds[k] {
			t.Errorf("deploy/k8s has no %s", k)
		}
	}
	if deployment == nil || service == nil {
		t.Fatal("Deployment or Service missing")
	}
	if got := dig(deployment, "spec", "replicas"); got != 2 {
		t.Errorf("replicas = %v, want 2 (active and standby)", got)
	}
	c := dig(deployment, "spec", "template", "spec", "containers", "0")
	_, defPort, _ := strings.Cut(defaultOf("metrics-addr"), ":")
	if got := dig(c, "ports", "0", "containerPort"); strconv.Itoa(toInt(got)) != defPort {
		t.Errorf("containerPort = %v, want the default --metrics-addr port %s", got, defPort)
	}
	if got := dig(service, "spec", "ports", "0", "port"); strconv.Itoa(toInt(got)) != defPort {
		t.Errorf("Service port = %v, want %s", got, defPort)
	}

	// The probes hit paths the relay serves.
	srv, err := relaypkg.NewHTTPServer("127.0.0.1:0", relaypkg.NewMetrics(&replication.Stats{}, relaypkg.NewLagRate(func() uint64 { return 0 })), &replication.Stats{}, time.Minute, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	for _, probe := range []string{"livenessProbe", "readinessProbe"} {
		path, _ := dig(c, probe, "httpGet", "path").(string)
		resp, err := http.Get("http://" + srv.Addr().String() + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if path == "" || resp.StatusCode == http.StatusNotFound {
			t.Errorf("%s path %q is not served by the relay", probe, path)
		}
	}
	// Env names are real settings.
	envs, _ := dig(c, "env").([]any)
	for _, e := range envs {
		name, _ := dig(e, "name").(string)
		if strings.HasPrefix(name, "CDC_RELAY_") && !isSettingEnv(name) {
			t.Errorf("Deployment env %s is not a relay setting", name)
		}
	}
	// The ConfigMap's relay.yaml is a valid --config file.
	for _, doc := range yamlDocs(t, filepath.Join(dir, "configmap.yaml")) {
		if text, ok := dig(doc, "data", "relay.yaml").(string); ok {
			path := filepath.Join(t.TempDir(), "relay.yaml")
			os.WriteFile(path, []byte(text), 0o600)
			if _, err := readYAML(path); err != nil {
				t.Errorf("configmap relay.yaml: %v", err)
			}
		}
	}
	// Alerts reference exported metrics.
	known := relayMetricNames(t)
	rules := 0
	for _, doc := range yamlDocs(t, filepath.Join(dir, "prometheusrule.yaml")) {
		groups, _ := dig(doc, "spec", "groups").([]any)
		for _, g := range groups {
			rs, _ := dig(g, "rules").([]any)
			for _, r := range rs {
				expr, _ := dig(r, "expr").(string)
				name, _ := dig(r, "alert").(string)
				if checkMetricRefs(t, "alert "+name, expr, known) == 0 {
					t.Errorf("alert %s uses no relay metric", name)
				}
				rules++
			}
		}
	}
	if rules < 6 {
		t.Errorf("%d alerts, want at least 6", rules)
	}
}

func TestGrafanaDashboard(t *testing.T) {
	b, err := os.ReadFile("../../deploy/grafana/cdc-relay.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatal(err)
	}
	known := relayMetricNames(t)
	if len(dash.Panels) < 8 {
		t.Fatalf("%d panels", len(dash.Panels))
	}
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			checkMetricRefs(t, "panel "+p.Title, tg.Expr, known)
		}
	}
}

func TestComposeUsesRealSettings(t *testing.T) {
	docs := yamlDocs(t, "../../docker-compose.yml")
	for _, service := range []string{"cdc-relay", "cdc-relay-rabbitmq"} {
		relay := dig(docs[0], "services", service)
		envs, _ := dig(relay, "environment").(map[string]any)
		if len(envs) == 0 {
			t.Fatalf("%s service has no environment", service)
		}
		for name := range envs {
			if !isSettingEnv(name) {
				t.Errorf("docker-compose env %s of %s is not a relay setting", name, service)
			}
		}
	}
	pg := dig(docs[0], "services", "postgres", "command")
	if !strings.Contains(strings.Join(toStrings(pg), " "), "wal_level=logical") {
		t.Errorf("postgres service does not set wal_level=logical: %v", pg)
	}
}

func isSettingEnv(name string) bool {
	for _, s := range config.Relay.Settings() {
		if s.Env() == name {
			return true
		}
	}
	return false
}

func defaultOf(name string) string {
	if s := config.Relay.Lookup(name); s != nil {
		return s.Default
	}
	return ""
}

func toInt(v any) int {
	switch x := v.(type) {
	case int:
		return x
	case float64:
		return int(x)
	}
	return -1
}

func toStrings(v any) []string {
	list, _ := v.([]any)
	out := make([]string, len(list))
	for i, x := range list {
		out[i], _ = x.(string)
	}
	return out
}
