package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/cdc-relay/cdc-relay/internal/config"
	"github.com/cdc-relay/cdc-relay/preflight"
	relaypkg "github.com/cdc-relay/cdc-relay/relay"
	"github.com/cdc-relay/cdc-relay/router"
	"github.com/cdc-relay/cdc-relay/schemaregistry"
)

const schemasUsage = `Usage: cdc-relay schemas check [flags]

Verbs:
  check   test local .avsc files against the registry's compatibility rules,
          registering nothing (cdc-relay schemas check --help)
`

// schemasCommand is `cdc-relay schemas check`: a CI gate that tests local
// .avsc files against the registry's compatibility rules without
// registering anything.
func schemasCommand(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help" || args[0] == "help") {
		fmt.Fprint(stdout, schemasUsage)
		return exitOK
	}
	if len(args) == 0 || args[0] != "check" {
		fmt.Fprint(stderr, "cdc-relay schemas: want a verb: check\n\n"+schemasUsage)
		return exitConfig
	}
	v, code, ok := loadValues(config.SchemasCheck, args[1:], getenv, stdout, stderr)
	if !ok {
		return code
	}
	strategyName, template, dir := config.SubjectStrategy.From(v), config.TopicTemplate.From(v), config.SchemasDir.From(v)
	strategy, err := schemaregistry.ParseStrategy(strategyName)
	if err != nil {
		fmt.Fprintf(stderr, "cdc-relay: --subject-strategy: %q is not topic, record or topic_record\n", strategyName)
		return exitConfig
	}
	rt, err := router.New(template)
	if err != nil {
		fmt.Fprintf(stderr, "cdc-relay: %v\n", err)
		return exitConfig
	}
	schemas, err := schemaregistry.LoadDir(dir)
	if err != nil {
		fmt.Fprintf(stderr, "cdc-relay: %v\n", err)
		return exitConfig
	}
	hc, err := relaypkg.RegistryHTTPClient(&Config{RegistryCAFile: config.SchemaRegistryCAFile.From(v)})
	if err != nil {
		fmt.Fprintf(stderr, "cdc-relay: --schema-registry-ca-file: %v\n", err)
		return exitConfig
	}
	reg, err := schemaregistry.New(schemaregistry.Config{URL: config.SchemaRegistryURL.From(v), Strategy: strategy, Schemas: schemas,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), HTTPClient: hc})
	if err != nil {
		fmt.Fprintf(stderr, "cdc-relay: --schema-registry-url: %v\n", err)
		return exitConfig
	}
	var topics []string
	for _, a := range config.AggregateTypes.From(v) {
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
	return preflight.PrintCompat(stdout, results, len(schemas))
}
