package config

import (
	"fmt"
	"strings"
)

// The markers around the settings table in docs/CONFIGURATION.md: go
// generate ./internal/config/ rewrites what is between them.
const (
	TableBegin = "<!-- settings:begin -->"
	TableEnd   = "<!-- settings:end -->"
)

// SettingsTable is docs/CONFIGURATION.md's settings table, written from
// the declarations in Relay's order: a row per setting (or per settings
// that share one, DocJoin), with its default (DocDefault, else "required"
// for a setting run requires, else Default) and its meaning (Doc, else
// Help).
func SettingsTable() string {
	var b strings.Builder
	b.WriteString("| flag | default | meaning |\n|---|---|---|\n")
	var row []string // flags, default, meaning of the row being written
	flush := func() {
		if row != nil {
			for _, cell := range row {
				b.WriteString("| " + cell)
				if cell != "" {
					b.WriteString(" ")
				}
			}
			b.WriteString("|\n")
		}
	}
	for _, s := range Relay.Settings() {
		if s.DocJoin && row != nil {
			row[0] += ", `--" + s.Name + "`"
			continue
		}
		flush()
		row = []string{"`--" + s.Name + "`", s.tableDefault(), s.Help}
		if s.Doc != "" {
			row[2] = s.Doc
		}
	}
	flush()
	return b.String()
}

// tableDefault is the setting's default column.
func (s *Setting) tableDefault() string {
	switch {
	case s.DocDefault != "":
		return s.DocDefault
	case contains(Run.Required, s.Name):
		return "required"
	case s.Default != "":
		return "`" + s.Default + "`"
	}
	return ""
}

// TableIn returns the text of doc between TableBegin and TableEnd,
// without the newlines that end the begin marker's line and start the end
// marker's.
func TableIn(doc string) (string, error) {
	_, rest, ok := strings.Cut(doc, TableBegin+"\n")
	table, _, ok2 := strings.Cut(rest, TableEnd)
	if !ok || !ok2 {
		return "", fmt.Errorf("no %s ... %s lines around the settings table", TableBegin, TableEnd)
	}
	return table, nil
}

// WithSettingsTable returns doc with SettingsTable between its markers.
func WithSettingsTable(doc string) (string, error) {
	old, err := TableIn(doc)
	if err != nil {
		return "", err
	}
	before, after, _ := strings.Cut(doc, TableBegin+"\n"+old)
	return before + TableBegin + "\n" + SettingsTable() + after, nil
}
