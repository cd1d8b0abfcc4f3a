package config

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// run's required settings.
var required = []string{"--pg-url", "postgres://u@h/db", "--kafka-brokers", "k:9092"}

func load(t *testing.T, cmd *Command, args []string, e map[string]string) (*Values, error) {
	t.Helper()
	return Load(cmd, args, env(e), &bytes.Buffer{}, nil)
}

func writeFile(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "relay.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestFlagSyntax: Go's flag syntax, which manifests rely on, keeps working.
func TestFlagSyntax(t *testing.T) {
	tests := []struct {
		name string
		args []string
		key  string
		want string
	}{
		{"one dash", []string{"-slot", "a"}, "slot", "a"},
		{"two dashes", []string{"--slot", "a"}, "slot", "a"},
		{"equals", []string{"--slot=a"}, "slot", "a"},
		{"one dash equals", []string{"-slot=a"}, "slot", "a"},
		{"bool with a separate value", []string{"--kafka-tls", "true"}, "kafka-tls", "true"},
		{"bool false", []string{"-kafka-tls", "false"}, "kafka-tls", "false"},
		{"bare bool", []string{"--cloudevents", "--cloudevents-source", "/x"}, "cloudevents", "true"},
		{"bare bool last", []string{"--allow-extra-tables"}, "allow-extra-tables", "true"},
		{"bool equals", []string{"--kafka-tls=true"}, "kafka-tls", "true"},
		{"repeated list", []string{"--table", "a.x", "--table", "b.y"}, "table", "a.x,b.y"},
		{"empty list", []string{"--table", ""}, "table", ""},
		{"value starting with a dash", []string{"--message-prefix", "-x", "--kafka-tls"}, "kafka-tls", "true"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, err := load(t, Run, append(append([]string{}, required...), tc.args...), nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := v.String(tc.key); got != tc.want {
				t.Errorf("--%s = %q, want %q", tc.key, got, tc.want)
			}
			if v.Source(tc.key) != FromFlag {
				t.Errorf("--%s source %v, want FromFlag", tc.key, v.Source(tc.key))
			}
		})
	}
	if _, err := load(t, Run, append(append([]string{}, required...), "--kafka-tls", "yes"), nil); err == nil || !strings.Contains(err.Error(), "--kafka-tls") {
		t.Errorf("--kafka-tls yes: %v, want an error naming --kafka-tls", err)
	}
	if _, err := load(t, Run, append(append([]string{}, required...), "stray"), nil); err == nil || !strings.Contains(err.Error(), `"stray"`) {
		t.Errorf("a stray argument: %v", err)
	}
}

// TestPrecedence: flag > env > YAML > default, for every kind.
func TestPrecedence(t *testing.T) {
	path := writeFile(t, "slot: y_slot\npublication: y_pub\ndlq-topic: y.dlq\nkafka_linger: 5ms\ntable: [a.x, {name: b.y, columns: {aggregate_id: agg}}]\ncolumns:\n  event_type: type\n")
	v, err := load(t, Run, append([]string{"--config", path, "--slot", "f_slot"}, required...),
		map[string]string{"CDC_RELAY_SLOT": "e_slot", "CDC_RELAY_PUBLICATION": "e_pub"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		key, want string
		src       Source
	}{
		{"slot", "f_slot", FromFlag},
		{"publication", "e_pub", FromEnv},
		{"dlq-topic", "y.dlq", FromYAML},
		{"kafka-linger", "5ms", FromYAML},
		{"table", "a.x,b.y", FromYAML},
		{"on-invalid", "dlq", FromDefault},
		{"config", path, FromFlag},
	}
	for _, tc := range tests {
		if got := v.String(tc.key); got != tc.want || v.Source(tc.key) != tc.src {
			t.Errorf("--%s = %q from %v, want %q from %v", tc.key, got, v.Source(tc.key), tc.want, tc.src)
		}
	}
	if got := v.File().Section("columns")["event_type"]; got != "type" {
		t.Errorf("columns.event_type = %q", got)
	}
	if e := v.File().Entries("table"); len(e) != 1 || e[0].Name != "b.y" || e[0].Maps["columns"]["aggregate_id"] != "agg" {
		t.Errorf("table entries %+v", e)
	}
	if d := v.Duration("kafka-linger"); d.Milliseconds() != 5 {
		t.Errorf("Duration(kafka-linger) = %s", d)
	}
	if n := v.Int("max-in-flight-events"); n != 50000 {
		t.Errorf("Int(max-in-flight-events) = %d", n)
	}
}

// TestEnvFile: CDC_RELAY_X_FILE holds the value; X wins over X_FILE, with a
// WARN; a flag wins over both without reading the file.
func TestEnvFile(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "pg")
	if err := os.WriteFile(secret, []byte("postgres://from-file@h/db\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range Commands() {
		if !cmd.takes("pg-url") {
			continue
		}
		v, err := load(t, cmd, nil, map[string]string{"CDC_RELAY_PG_URL_FILE": secret, "CDC_RELAY_KAFKA_BROKERS": "k:9092"})
		if err != nil {
			t.Fatalf("%s: %v", cmd.Name, err)
		}
		if got := v.String("pg-url"); got != "postgres://from-file@h/db" {
			t.Errorf("%s: pg-url from _FILE = %q", cmd.Name, got)
		}
	}
	var logs bytes.Buffer
	v, err := Load(Status, nil, env(map[string]string{"CDC_RELAY_PG_URL": "postgres://from-env@h/db", "CDC_RELAY_PG_URL_FILE": secret}),
		&bytes.Buffer{}, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if got := v.String("pg-url"); got != "postgres://from-env@h/db" {
		t.Errorf("X and X_FILE: pg-url = %q, want X's", got)
	}
	if out := logs.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "CDC_RELAY_PG_URL_FILE") {
		t.Errorf("X and X_FILE: no WARN naming both: %q", out)
	}
	if _, err := load(t, Status, []string{"--pg-url", "postgres://h/db"}, map[string]string{"CDC_RELAY_PG_URL_FILE": "/nonexistent"}); err != nil {
		t.Errorf("a flag must win over a _FILE env: %v", err)
	}
	if _, err := load(t, Status, nil, map[string]string{"CDC_RELAY_PG_URL_FILE": "/nonexistent"}); err == nil || !strings.Contains(err.Error(), "--pg-url") {
		t.Errorf("an unreadable _FILE: %v, want an error naming --pg-url", err)
	}
}

// TestYAMLUnknownKeys: an unknown key at any depth names its path.
func TestYAMLUnknownKeys(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       []string
	}{
		{"top level", "slott: x\n", []string{`"slott"`, "did you mean slot?"}},
		{"table entry", "table:\n  - name: public.outbox\n    colums:\n      id: event_id\n", []string{"table[0].colums", "did you mean columns?"}},
		{"table entry column", "table:\n  - public.a\n  - name: public.outbox\n    columns:\n      agregate_id: agg\n", []string{"table[1].columns.agregate_id", "did you mean aggregate_id?"}},
		{"columns", "columns:\n  payloads: body\n", []string{"columns.payloads", "did you mean payload?"}},
		{"config is not a key", "config: other.yaml\n", []string{`"config"`}},
		{"entry without a name", "table:\n  - columns: {id: x}\n", []string{"table[0]", "{name: schema.table"}},
		{"not a mapping", "- a\n- b\n", []string{"want a mapping"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Relay.ReadFile(writeFile(t, tc.yaml))
			var cerr *Error
			if !errors.As(err, &cerr) {
				t.Fatalf("err = %v, want an *Error", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not say %q", err, w)
				}
			}
		})
	}
	// Every command reads the whole file: a typo fails status too.
	path := writeFile(t, "pg-url: postgres://h/db\ntable:\n  - name: public.outbox\n    colums: {id: x}\n")
	if _, err := load(t, Status, []string{"--config", path}, nil); err == nil || !strings.Contains(err.Error(), "table[0].colums") {
		t.Errorf("status with a nested typo: %v", err)
	}
}

// TestUnknownFlag: an unknown flag names the nearest known one; a setting
// of another command says this one does not take it.
func TestUnknownFlag(t *testing.T) {
	tests := []struct {
		cmd  *Command
		flag string
		want string
	}{
		{Run, "--pg-ur", "did you mean --pg-url?"},
		{Run, "-pg_url", "did you mean --pg-url?"},
		{Replay, "--sinse", "did you mean --since?"},
		{SlotRecreate, "--accept_gap", "did you mean --accept-gap?"},
		{Status, "--jsn", "did you mean --json?"},
		{Status, "--publication", "cdc-relay status does not take it"},
		{Healthcheck, "--metrics-adr", "did you mean --metrics-addr?"},
		{Run, "--nope", "unknown flag --nope (cdc-relay run --help lists the flags)"},
	}
	for _, tc := range tests {
		_, err := load(t, tc.cmd, []string{tc.flag, "x"}, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %s: %v, want %q", tc.cmd.Name, tc.flag, err, tc.want)
		}
	}
}

// TestActionsFlagsOnly: an action flag is never read from env or YAML.
func TestActionsFlagsOnly(t *testing.T) {
	v, err := load(t, Replay, required, map[string]string{"CDC_RELAY_SINCE": "1h", "CDC_RELAY_DRY_RUN": "true"})
	if err != nil {
		t.Fatal(err)
	}
	if _, given := v.Action("since"); given || v.ActionBool("dry-run") {
		t.Error("CDC_RELAY_SINCE or CDC_RELAY_DRY_RUN set an action flag")
	}
	if _, err := Relay.ReadFile(writeFile(t, "since: 1h\n")); err == nil {
		t.Error("since: in YAML is accepted")
	}
	v, err = load(t, SlotRecreate, append(append([]string{}, required...), "--accept-gap", "--reason", "INC-1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if reason, _ := v.Action("reason"); !v.ActionBool("accept-gap") || reason != "INC-1" {
		t.Errorf("accept-gap %v, reason %q", v.ActionBool("accept-gap"), reason)
	}
	if _, err := load(t, SlotRecreate, append(append([]string{}, required...), "--reason", "a", "--reason", "b"), nil); err == nil {
		t.Error("--reason given twice is accepted")
	}
}

// TestRequired: a missing required setting names the flag, env and key.
func TestRequired(t *testing.T) {
	for _, cmd := range Commands() {
		for _, name := range cmd.Required {
			_, err := load(t, cmd, nil, nil)
			if err == nil || !strings.HasPrefix(err.Error(), "--") || !strings.Contains(err.Error(), "is required") {
				t.Errorf("%s without --%s: %v", cmd.Name, name, err)
			}
		}
	}
	if _, err := load(t, Run, []string{"--pg-url", "postgres://h/db"}, nil); err == nil || !strings.Contains(err.Error(), "CDC_RELAY_KAFKA_BROKERS") {
		t.Errorf("run without brokers: %v", err)
	}
}

// TestHelp: each command's --help is its own usage, its action flags, and
// every setting with its default and env name, and mentions _FILE.
func TestHelp(t *testing.T) {
	for _, cmd := range Commands() {
		for _, arg := range []string{"--help", "-h", "-help"} {
			var out bytes.Buffer
			_, err := Load(cmd, []string{arg}, env(nil), &out, nil)
			if !errors.Is(err, ErrHelp) {
				t.Fatalf("%s %s: %v, want ErrHelp", cmd.Name, arg, err)
			}
			help := out.String()
			if !strings.HasPrefix(help, "Usage: "+cmd.Name+" ") {
				t.Errorf("%s %s does not start with its usage line:\n%s", cmd.Name, arg, help)
			}
			for _, want := range []string{"_FILE", "flag > env > YAML"} {
				if !strings.Contains(help, want) {
					t.Errorf("%s %s does not mention %s", cmd.Name, arg, want)
				}
			}
			for _, name := range cmd.Settings {
				s := Relay.Lookup(name)
				if !strings.Contains(help, "  --"+name) || !strings.Contains(help, s.Env()) {
					t.Errorf("%s %s does not list --%s with %s", cmd.Name, arg, name, s.Env())
				}
				if s.Default != "" && !strings.Contains(help, "default "+s.Default) {
					t.Errorf("%s %s does not give --%s's default %s", cmd.Name, arg, name, s.Default)
				}
			}
			for _, a := range cmd.Actions {
				if !strings.Contains(help, "  --"+a.Name) {
					t.Errorf("%s %s does not list --%s", cmd.Name, arg, a.Name)
				}
			}
		}
	}
}

// TestDefaultsValid: every declared default passes its own validation.
func TestDefaultsValid(t *testing.T) {
	for _, s := range Relay.Settings() {
		if s.Default == "" {
			continue
		}
		if err := s.validate(s.Default); err != nil {
			t.Errorf("--%s default %q: %v", s.Name, s.Default, err)
		}
	}
	bad := map[string]string{"slot": "Bad-Slot", "status-interval": "1h", "max-record-bytes": "10", "on-invalid": "drop",
		"metrics-addr": "9187", "kafka-brokers": "nohost", "schema-registry-url": "r:8081", "checkpoint-topic": "a b"}
	for name, val := range bad {
		if err := Relay.Lookup(name).validate(val); err == nil || !strings.HasPrefix(err.Error(), "--"+name+": ") {
			t.Errorf("--%s %q: %v, want an error naming it", name, val, err)
		}
	}
}

// TestSettingsTableListsEverySetting: the settings table of
// docs/CONFIGURATION.md (between its settings:begin and settings:end
// markers) is the one the declarations write (go generate), and it has a
// row for every setting and names no other.
func TestSettingsTableListsEverySetting(t *testing.T) {
	b, err := os.ReadFile("../../docs/CONFIGURATION.md")
	if err != nil {
		t.Fatal(err)
	}
	table, err := TableIn(string(b))
	if err != nil {
		t.Fatalf("docs/CONFIGURATION.md: %v", err)
	}
	if want := SettingsTable(); table != want {
		got, wantLines := strings.Split(table, "\n"), strings.Split(want, "\n")
		for i := range max(len(got), len(wantLines)) {
			g, w := "(none)", "(none)"
			if i < len(got) {
				g = got[i]
			}
			if i < len(wantLines) {
				w = wantLines[i]
			}
			if g != w {
				t.Errorf("docs/CONFIGURATION.md's settings table differs from the declarations (internal/config/relay.go): run go generate ./... (or go generate ./internal/config/)\nline %d of the table:\n got: %s\nwant: %s", i+1, g, w)
				break
			}
		}
	}
	listed := map[string]bool{}
	for _, row := range strings.Split(table, "\n") {
		cells := strings.Split(row, "|")
		if len(cells) < 3 || !strings.HasPrefix(strings.TrimSpace(row), "|") {
			continue
		}
		for _, m := range regexp.MustCompile("`--([a-z0-9-]+)`").FindAllStringSubmatch(cells[1], -1) {
			listed[m[1]] = true
		}
	}
	for i, s := range Relay.Settings() {
		if !listed[s.Name] {
			t.Errorf("docs/CONFIGURATION.md's settings table has no row for `--%s`", s.Name)
		}
		delete(listed, s.Name)
		if s.DocJoin && (i == 0 || s.Doc != "" || s.DocDefault != "") {
			t.Errorf("--%s: DocJoin shares the row of the setting declared before it, whose Doc and DocDefault speak for both: it has none of its own", s.Name)
		}
	}
	for name := range listed {
		t.Errorf("docs/CONFIGURATION.md's settings table lists `--%s`, which no setting declares", name)
	}
}

// TestSettingsTableCells: a row's cells come from the declaration, and an
// empty one is written as the hand-written table did ("| |").
func TestSettingsTableCells(t *testing.T) {
	table := SettingsTable()
	for _, want := range []string{
		"| flag | default | meaning |\n|---|---|---|\n| `--config` | | ",
		"\n| `--pg-url` | required | ",
		"\n| `--slot` | `cdc_relay` | logical slot (pgoutput), created if missing |\n",
		"\n| `--relay-id` | `<system identifier>/<database>/<slot>` | ",
		"\n| `--kafka-tls-cert-file`, `--kafka-tls-key-file` | | client certificate for mutual TLS |\n",
		"\n| `--dlq-topic` | `outbox.dlq` | dead-letter topic |\n",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("SettingsTable() lacks %q", want)
		}
	}
	doc := "intro\n" + TableBegin + "\n| old |\n" + TableEnd + "\nafter\n"
	got, err := WithSettingsTable(doc)
	if err != nil {
		t.Fatal(err)
	}
	if want := "intro\n" + TableBegin + "\n" + table + TableEnd + "\nafter\n"; got != want {
		t.Errorf("WithSettingsTable replaced the wrong text:\n%s", got)
	}
	if _, err := WithSettingsTable("no markers"); err == nil {
		t.Error("WithSettingsTable of a text without markers: no error")
	}
}
