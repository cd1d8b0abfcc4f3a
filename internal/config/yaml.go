package config

import (
	"fmt"
	"os"
	"strings"

	"gopkg.in/yaml.v3"
)

// File is a --config YAML file, checked against the registry: its keys are
// the setting names (kebab-case, or snake_case) and the sections.
type File struct {
	path     string
	values   map[string]string
	sections map[string]map[string]string
	entries  map[string][]Entry
}

// Entry is a mapping entry of a list setting (a table entry): its value
// (the NameKey's) and its mapping keys.
type Entry struct {
	Name string
	Maps map[string]map[string]string
}

// ReadFile reads and checks a YAML file: an unknown key at any depth is an
// *Error on --config naming the key's path (table[0].colums).
func (r *Registry) ReadFile(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, errorf("config", "cannot read %s: %v", path, err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, errorf("config", "%s is not valid YAML: %v", path, err)
	}
	f := &File{path: path, values: map[string]string{}, sections: map[string]map[string]string{}, entries: map[string][]Entry{}}
	if len(doc.Content) == 0 {
		return f, nil // an empty file
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, errorf("config", "%s: want a mapping of setting names to values", path)
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, node := root.Content[i].Value, root.Content[i+1]
		key := strings.ReplaceAll(k, "_", "-")
		if sec := r.sections[key]; sec != nil {
			m, err := f.mapping(k, node, sec)
			if err != nil {
				return nil, err
			}
			f.sections[key] = m
			continue
		}
		s := r.byName[key]
		if s == nil || s.NoYAML {
			return nil, f.unknown(k, k, r.yamlKeys(), "keys are the flag names (cdc-relay run --help) and "+strings.Join(r.Sections(), ", "))
		}
		if err := f.setting(s, k, node); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// yamlKeys is every top-level key, for suggestions.
func (r *Registry) yamlKeys() []string {
	var keys []string
	for _, s := range r.settings {
		if !s.NoYAML {
			keys = append(keys, s.Name)
		}
	}
	return append(keys, r.Sections()...)
}

// setting reads the value of one setting: a scalar, or a list of scalars
// (and of Entry mappings) joined with commas.
func (f *File) setting(s *Setting, path string, node *yaml.Node) error {
	switch node.Kind {
	case yaml.ScalarNode:
		f.values[s.Name] = node.Value
		return nil
	case yaml.SequenceNode:
	default:
		return errorf(s.Name, "in %s: %s: want a value or a list of values", f.path, path)
	}
	var list []string
	for i, item := range node.Content {
		at := fmt.Sprintf("%s[%d]", path, i)
		switch {
		case item.Kind == yaml.ScalarNode:
			list = append(list, item.Value)
		case item.Kind == yaml.MappingNode && s.Entry != nil:
			e, err := f.entry(s, at, item)
			if err != nil {
				return err
			}
			list = append(list, e.Name)
			f.entries[s.Name] = append(f.entries[s.Name], e)
		case s.Entry != nil:
			return errorf(s.Name, "in %s: %s: %s", f.path, at, s.Entry.Help)
		default:
			return errorf(s.Name, "in %s: %s: want a value", f.path, at)
		}
	}
	f.values[s.Name] = strings.Join(list, ",")
	return nil
}

// entry reads one mapping entry of a list setting.
func (f *File) entry(s *Setting, path string, node *yaml.Node) (Entry, error) {
	e := Entry{Maps: map[string]map[string]string{}}
	for i := 0; i+1 < len(node.Content); i += 2 {
		k, v := node.Content[i].Value, node.Content[i+1]
		at := path + "." + k
		sub, known := s.Entry.Keys[k]
		switch {
		case !known:
			return e, f.unknown(at, k, s.Entry.keyList(), s.Entry.Help)
		case sub == nil && v.Kind != yaml.ScalarNode:
			return e, errorf("config", "%s: %s: want a value", f.path, at)
		case sub == nil && k == s.NameKey:
			e.Name = v.Value
		case sub == nil:
		default:
			m, err := f.mapping(at, v, sub)
			if err != nil {
				return e, err
			}
			e.Maps[k] = m
		}
	}
	if e.Name == "" {
		return e, errorf(s.Name, "in %s: %s: %s", f.path, path, s.Entry.Help)
	}
	return e, nil
}

// mapping reads a mapping of scalars whose keys the shape lists.
func (f *File) mapping(path string, node *yaml.Node, shape *Shape) (map[string]string, error) {
	if node.Kind == yaml.ScalarNode && node.Tag == "!!null" {
		return nil, nil
	}
	if node.Kind != yaml.MappingNode {
		return nil, errorf("config", "%s: %s: want a mapping: %s", f.path, path, shape.Help)
	}
	m := map[string]string{}
	for i := 0; i+1 < len(node.Content); i += 2 {
		k, v := node.Content[i].Value, node.Content[i+1]
		at := path + "." + k
		if _, known := shape.Keys[k]; !known {
			return nil, f.unknown(at, k, shape.keyList(), shape.Help)
		}
		if v.Kind != yaml.ScalarNode {
			return nil, errorf("config", "%s: %s: want a value", f.path, at)
		}
		m[k] = v.Value
	}
	return m, nil
}

// unknown is the error for an unknown key at path, naming the nearest.
func (f *File) unknown(path, key string, known []string, hint string) error {
	msg := fmt.Sprintf("%s: unknown key %s", f.path, path)
	if path == key {
		msg = fmt.Sprintf("%s: unknown key %q", f.path, key)
	}
	if near := nearest(key, known); near != "" {
		msg += fmt.Sprintf(": did you mean %s?", near)
	}
	return errorf("config", "%s; %s", msg, hint)
}

// Value returns a setting's value in the file.
func (f *File) Value(name string) (string, bool) {
	if f == nil {
		return "", false
	}
	v, ok := f.values[name]
	return v, ok
}

// Section returns a YAML-only section (columns:), or nil.
func (f *File) Section(name string) map[string]string {
	if f == nil {
		return nil
	}
	return f.sections[name]
}

// Entries returns the mapping entries of a list setting.
func (f *File) Entries(name string) []Entry {
	if f == nil {
		return nil
	}
	return f.entries[name]
}
