package schemaregistry

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"strings"
)

// Preflight registers, at startup, every subject that can be known before
// the first event, so that the registry checks each against its
// compatibility level and an incompatible schema stops the relay before it
// produces anything:
//
//   - Record: every local schema, under its record full name.
//   - TopicRecord: every existing subject "<topic>-<full name>" whose
//     full name is a local schema's and whose topic satisfies matchTopic.
//   - Topic: every existing subject "<topic>-value" whose topic satisfies
//     matchTopic, with the local schemas whose full name equals the record
//     name of the subject's latest version.
//
// matchTopic says whether a topic could come from the relay's topic
// template; nil matches every topic. Subjects of new topics are registered
// by Encoder on first use.
//
// All incompatible schemas are reported, joined, as *IncompatibleError.
// Network errors and 5xx are retried with backoff until ctx is done; other
// 4xx answers end Preflight with an error.
func (r *Registry) Preflight(ctx context.Context, matchTopic func(topic string) bool) error {
	if matchTopic == nil {
		matchTopic = func(string) bool { return true }
	}
	var incompatible []error
	checked := 0
	check := func(topic, subject string, s *Schema) error {
		enc, err := r.ensure(ctx, subject, s)
		var ie *IncompatibleError
		if errors.As(err, &ie) {
			incompatible = append(incompatible, err)
			return nil
		}
		if err != nil {
			return err
		}
		checked++
		if topic != "" {
			r.publish(topic, s.EventType, enc)
		}
		return nil
	}

	schemas := r.sortedSchemas()
	switch r.strategy {
	case Record:
		for _, s := range schemas {
			if err := check("", s.FullName, s); err != nil {
				return err
			}
		}
	case TopicRecord, Topic:
		subjects, err := r.subjects(ctx)
		if err != nil {
			return err
		}
		sort.Strings(subjects)
		for _, subject := range subjects {
			if r.strategy == Topic {
				topic, ok := r.strategy.topicOf(subject, "")
				if !ok || !matchTopic(topic) {
					continue
				}
				latest, err := r.latest(ctx, subject)
				if err != nil {
					return err
				}
				name := schemaFullName(latest.Schema)
				for _, s := range schemas {
					if s.FullName == name {
						if err := check(topic, subject, s); err != nil {
							return err
						}
					}
				}
				continue
			}
			for _, s := range schemas {
				topic, ok := r.strategy.topicOf(subject, s.FullName)
				if !ok || !matchTopic(topic) {
					continue
				}
				if err := check(topic, subject, s); err != nil {
					return err
				}
			}
		}
	}
	r.log.Info("schema registry preflight done", keyURL, r.base, keyStrategy, r.strategy.String(),
		keyCount, checked, keyIncompatible, len(incompatible))
	if len(incompatible) == 1 {
		return incompatible[0]
	}
	return errors.Join(incompatible...)
}

// schemaFullName returns the full name of the top-level type of a
// registered Avro schema text, or "" when it has none (other schema types,
// unparsable text).
func schemaFullName(text string) string {
	var v any
	if json.Unmarshal([]byte(text), &v) != nil {
		return ""
	}
	switch v := v.(type) {
	case string:
		return v
	case map[string]any:
		name, _ := v["name"].(string)
		if name == "" {
			t, _ := v["type"].(string)
			return t
		}
		if strings.Contains(name, ".") {
			return name
		}
		if ns, _ := v["namespace"].(string); ns != "" {
			return ns + "." + name
		}
		return name
	}
	return ""
}
