// Command gentable writes the settings table of docs/CONFIGURATION.md from
// the declarations in internal/config (config.SettingsTable), between its
// settings:begin and settings:end markers. go generate ./internal/config/
// runs it; the file's path is its argument.
package main

import (
	"fmt"
	"os"

	"github.com/cdc-relay/cdc-relay/internal/config"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gentable path/to/CONFIGURATION.md")
		os.Exit(2)
	}
	path := os.Args[1]
	b, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "gentable: %v\n", err)
		os.Exit(1)
	}
	doc, err := config.WithSettingsTable(string(b))
	if err != nil {
		fmt.Fprintf(os.Stderr, "gentable: %s: %v\n", path, err)
		os.Exit(1)
	}
	if doc == string(b) {
		return
	}
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		fmt.Fprintf(os.Stderr, "gentable: %v\n", err)
		os.Exit(1)
	}
}
