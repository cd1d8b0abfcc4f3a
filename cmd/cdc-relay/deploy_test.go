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

// TestKubernetesRabbitMQOverlay: deploy/k8s/rabbitmq is a kustomize overlay
// whose resources exist, whose relay.yaml (with the Secret's URLs in the
// env the Deployment patch sets) is a valid RabbitMQ configuration, and
// whose env and Secret keys are the relay's settings and the Secret's keys.
func TestKubernetesRabbitMQOverlay(t *testing.T) {
	dir := "../../deploy/k8s/rabbitmq"
	kust := yamlDocs(t, filepath.Join(dir, "kustomization.yaml"))[0]
	resources, _ := kust["resources"].([]any)
	if len(resources) == 0 {
		t.Fatal("kustomization.yaml lists no resources")
	}
	for _, r := range resources {
		if _, err := os.Stat(filepath.Join(dir, r.(string))); err != nil {
			t.Errorf("resource %v: %v", r, err)
		}
	}
	secret := yamlDocs(t, filepath.Join(dir, "secret.example.yaml"))[0]
	keys, _ := dig(secret, "stringData").(map[string]any)
	patches, _ := kust["patches"].([]any)
	var envPatch string
	var cfgPatch string
	for _, p := range patches {
		m := p.(map[string]any)
		if s, ok := m["patch"].(string); ok {
			envPatch = s
		}
		if s, ok := m["path"].(string); ok {
			cfgPatch = s
		}
	}
	var ops []any
	if err := yaml.Unmarshal([]byte(envPatch), &ops); err != nil || len(ops) == 0 {
		t.Fatalf("the Deployment patch (%v): %q", err, envPatch)
	}
	env := map[string]string{}
	for _, op := range ops {
		name, _ := dig(op, "value", "name").(string)
		key, _ := dig(op, "value", "valueFrom", "secretKeyRef", "key").(string)
		if !isSettingEnv(name) {
			t.Errorf("the Deployment patch sets %s, not a relay setting", name)
		}
		v, ok := keys[key].(string)
		if !ok {
			t.Errorf("the Deployment patch reads Secret key %q, which secret.example.yaml lacks", key)
		}
		env[name] = v
	}
	if env["CDC_RELAY_RABBITMQ_URL"] == "" || keys["pg-url"] == nil {
		t.Fatalf("the overlay does not give both URLs: %v, Secret keys %v", env, keys)
	}
	// The Secret's PostgreSQL URL names a CA file of the pod; the
	// Deployment's own env passes it, and TestKubernetesManifests checks it.
	env["CDC_RELAY_PG_URL"] = "postgres://cdc_relay@postgres:5432/app"
	relayYAML, _ := dig(yamlDocs(t, filepath.Join(dir, cfgPatch))[0], "data", "relay.yaml").(string)
	path := filepath.Join(t.TempDir(), "relay.yaml")
	if err := os.WriteFile(path, []byte(relayYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig([]string{"--config", path}, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatalf("the overlay's relay.yaml: %v", err)
	}
	if !c.RabbitMQ() || c.RabbitMQExchange != "outbox" || c.ExactlyOnce {
		t.Fatalf("the overlay's relay.yaml: RabbitMQ %v, exchange %q, exactly-once %v", c.RabbitMQ(), c.RabbitMQExchange, c.ExactlyOnce)
	}
}
