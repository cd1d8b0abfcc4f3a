package router

import (
	"fmt"
	"slices"
	"strings"
)

// Part is one piece of a parsed template: a literal, or a placeholder.
type Part struct {
	Lit         string // the literal text, when Placeholder is ""
	Placeholder string // the placeholder with its braces, e.g. "{event_type}"
}

// ParseTemplate splits a template into literals and placeholders, each
// placeholder one of allowed (braces included). An unclosed '{' or a
// placeholder not in allowed is an error that quotes the template and
// lists allowed: `"x.{a": unclosed '{': use {a}, {b} or {c}`. The topic
// template and RabbitMQ's routing key share it.
func ParseTemplate(template string, allowed ...string) ([]Part, error) {
	var parts []Part
	rest := template
	for rest != "" {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			parts = append(parts, Part{Lit: rest})
			break
		}
		if i > 0 {
			parts = append(parts, Part{Lit: rest[:i]})
		}
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			return nil, fmt.Errorf("%q: unclosed '{': use %s", template, oneOf(allowed))
		}
		ph := rest[i : i+j+1]
		if !slices.Contains(allowed, ph) {
			return nil, fmt.Errorf("%q: unknown placeholder %s: use %s", template, ph, oneOf(allowed))
		}
		parts = append(parts, Part{Placeholder: ph})
		rest = rest[i+j+1:]
	}
	return parts, nil
}

// oneOf lists names as "a", "a or b", "a, b or c".
func oneOf(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
