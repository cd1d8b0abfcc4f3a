package checkpoint

import (
	"os"
	"os/user"
)

// whoami names who accepted a gap: user@host of the process.
func whoami() string {
	name := "unknown"
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	host, _ := os.Hostname()
	if host == "" {
		host = "unknown"
	}
	return name + "@" + host
}
