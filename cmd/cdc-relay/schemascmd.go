package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/cdc-relay/cdc-relay/router"
	"github.com/cdc-relay/cdc-relay/schemaregistry"
)

// schemasCommand is `cdc-relay schemas check`: a CI gate that tests local
// .avsc files against the registry's compatibility rules without
// registering anything.
func schemasCommand(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "check" {
		fmt.Fprintln(stderr, "cdc-relay: usage: cdc-relay schemas check --schema-registry-url URL --schemas-dir DIR [--subject-strategy S] [--topic-template T] [--aggregate-types A,B]")
		return exitConfig
	}
	fs := flag.NewFlagSet("cdc-relay schemas check", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	opt := func(name, def, help string) *string {
		return fs.String(name, def, help+" (env "+EnvName(name)+")")
	}
	registryURL := opt("schema-registry-url", "", "Confluent-compatible registry (required)")
	dir := opt("schemas-dir", "", "directory of .avsc files (required)")
	strategyName := opt("subject-strategy", "topic_record", "topic, record or topic_record")
	template := opt("topic-template", router.DefaultTemplate, "topic name template")
	aggTypes := opt("aggregate-types", "", "comma-separated aggregate types whose topics to check even before their subjects exist")
	caFile := opt("schema-registry-ca-file", "", "PEM CA bundle for an https registry")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			return exitOK
		}
		fmt.Fprintf(stderr, "cdc-relay: %v\n", err)
		return exitConfig
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	fs.VisitAll(func(f *flag.Flag) {
		if !set[f.Name] {
			if v := getenv(EnvName(f.Name)); v != "" {
				f.Value.Set(v)
			}
		}
	})
	for name, v := range map[string]string{"schema-registry-url": *registryURL, "schemas-dir": *dir} {
		if v == "" {
			fmt.Fprintf(stderr, "cdc-relay: --%s: is required: set the flag or %s\n", name, EnvName(name))
			return exitConfig
		}
	}
	strategy, err := schemaregistry.ParseStrategy(*strategyName)
	if err != nil {
		fmt.Fprintf(stderr, "cdc-relay: --subject-strategy: %q is not topic, record or topic_record\n", *strategyName)
		return exitConfig
	}
	rt, err := router.New(*template)
	if err != nil {
		fmt.Fprintf(stderr, "cdc-relay: %v\n", err)
		return exitConfig
	}
	schemas, err := schemaregistry.LoadDir(*dir)
	if err != nil {
		fmt.Fprintf(stderr, "cdc-relay: %v\n", err)
		return exitConfig
	}
	hc, err := registryHTTPClient(&Config{RegistryCAFile: *caFile})
	if err != nil {
		fmt.Fprintf(stderr, "cdc-relay: --schema-registry-ca-file: %v\n", err)
		return exitConfig
	}
	reg, err := schemaregistry.New(schemaregistry.Config{URL: *registryURL, Strategy: strategy, Schemas: schemas,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), HTTPClient: hc})
	if err != nil {
		fmt.Fprintf(stderr, "cdc-relay: --schema-registry-url: %v\n", err)
		return exitConfig
	}
	var topics []string
	for _, a := range strings.Split(*aggTypes, ",") {
		if a = strings.TrimSpace(a); a == "" {
			continue
		}
		for _, s := range schemas {
			topic, err := rt.Topic([]byte(a), []byte(s.EventType))
			if err != nil {
				fmt.Fprintf(stderr, "cdc-relay: --aggregate-types: %v\n", err)
				return exitConfig
			}
			topics = append(topics, topic)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	results, err := reg.CheckCompatibility(ctx, rt.Matcher(), topics)
	if err != nil {
		fmt.Fprintf(stderr, "cdc-relay: schema registry: %v\n", err)
		return exitFailed
	}
	return printCompat(stdout, results, len(schemas))
}

// printCompat prints one line per subject and returns the exit code.
func printCompat(w io.Writer, results []schemaregistry.CompatResult, schemas int) int {
	bad := 0
	for _, r := range results {
		switch {
		case !r.Compatible:
			bad++
			reason := r.Reason
			if reason == "" {
				reason = "the registry gave no reason"
			}
			fmt.Fprintf(w, "FAIL  %s: %s (%s) is incompatible under %s: %s\n", r.Subject, r.EventType, r.File, r.Level, reason)
		case r.Exists:
			fmt.Fprintf(w, "ok    %s: %s is compatible under %s\n", r.Subject, r.EventType, r.Level)
		default:
			fmt.Fprintf(w, "ok    %s: %s is a new subject\n", r.Subject, r.EventType)
		}
	}
	if bad > 0 {
		fmt.Fprintf(w, "%d incompatible schema(s)\n", bad)
		return exitFailed
	}
	fmt.Fprintf(w, "%d schema(s), %d subject(s) checked: all compatible\n", schemas, len(results))
	return exitOK
}
