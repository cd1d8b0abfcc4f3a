package preflight

import (
	"context"
	"fmt"
	"io"

	"github.com/cdc-relay/cdc-relay/relay"
	"github.com/cdc-relay/cdc-relay/router"
	"github.com/cdc-relay/cdc-relay/schemaregistry"
)

// compatibility checks the local schemas against the subjects that exist in
// the registry, without registering anything.
func (c *checker) compatibility(ctx context.Context, cfg *relay.Config, schemas map[string]*schemaregistry.Schema) {
	hc, err := relay.RegistryHTTPClient(cfg)
	if err != nil {
		c.fail("schema registry: %v", err)
		return
	}
	reg, err := schemaregistry.New(schemaregistry.Config{URL: cfg.SchemaRegistryURL, Strategy: cfg.SubjectStrategy, Schemas: schemas, HTTPClient: hc, Logger: discardLogger()})
	if err != nil {
		c.fail("schema registry: %v", err)
		return
	}
	rt, err := router.New(cfg.TopicTemplate)
	if err != nil {
		c.fail("%v", err)
		return
	}
	results, err := reg.CheckCompatibility(ctx, rt.Matcher(), nil)
	if err != nil {
		c.fail("schema registry: compatibility check failed: %v", err)
		return
	}
	existing, incompatible := 0, 0
	for _, r := range results {
		switch {
		case !r.Compatible:
			incompatible++
			c.fail("schema %s (%s) is incompatible with subject %s %s%s; make the change compatible (e.g. give new fields defaults)", r.EventType, r.File, r.Subject, r.LevelPhrase(), reasonSuffix(r.Reason))
		case r.Exists:
			existing++
		}
	}
	// After a FAIL above, "compatible" would contradict it.
	if incompatible == 0 {
		c.ok("schemas: compatible with %d existing subject(s)", existing)
	}
}

// PrintCompat prints one line per subject of `cdc-relay schemas check`
// and returns the command's exit code.
func PrintCompat(w io.Writer, results []schemaregistry.CompatResult, schemas int) int {
	bad := 0
	for _, r := range results {
		switch {
		case !r.Compatible:
			bad++
			fmt.Fprintf(w, "FAIL  %s: %s (%s) is %s%s\n", r.Subject, r.EventType, r.File, r.Verdict(), reasonSuffix(r.Reason))
		default:
			fmt.Fprintf(w, "ok    %s: %s is %s\n", r.Subject, r.EventType, r.Verdict())
		}
	}
	if bad > 0 {
		fmt.Fprintf(w, "%d incompatible schema(s)\n", bad)
		return relay.ExitFailed
	}
	fmt.Fprintf(w, "%d schema(s), %d subject(s) checked: all compatible\n", schemas, len(results))
	return relay.ExitOK
}

// reasonSuffix is ": reason", or nothing for an empty reason.
func reasonSuffix(reason string) string {
	if reason == "" {
		return ""
	}
	return ": " + reason
}
