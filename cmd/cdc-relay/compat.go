package main

import (
	"context"

	"github.com/cdc-relay/cdc-relay/schemaregistry"
)

// compatibility checks local schemas against the registry without
// registering anything. (Filled in once schemaregistry exposes a dry-run check.)
func (c *checker) compatibility(ctx context.Context, cfg *Config, schemas map[string]*schemaregistry.Schema) {
}
