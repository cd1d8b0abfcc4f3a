package debeziumtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

const (
	// Version is the Debezium release scripts/debezium.sh installs; it must
	// equal debezium.version in scripts/debezium/pom.xml (a test checks
	// this).
	Version = "3.6.1.Final"
	// ConnectVersion is the Kafka Connect release it runs in: the 4.3 line
	// Debezium 3.6.1 was built against (it fails on 4.4.0, whose clients
	// moved a class it uses). It is connect.version in the same pom; the
	// worker is a client of a 4.4.0 broker like any older client.
	ConnectVersion = "4.3.1"
)

// LibsDir returns the directory holding Connect's and Debezium's jars: dir
// when not empty, else $CDC_RELAY_DEBEZIUM_LIBS, else
// $CDC_RELAY_CACHE/debezium-<Version>/libs (~/.cache/cdc-relay without
// CDC_RELAY_CACHE). It checks that the connector and Connect jars are there
// and that java is on PATH, and says how to fix either.
func LibsDir(dir string) (string, error) {
	if dir == "" {
		dir = os.Getenv("CDC_RELAY_DEBEZIUM_LIBS")
	}
	if dir == "" {
		cache := os.Getenv("CDC_RELAY_CACHE")
		if cache == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return "", fmt.Errorf("debeziumtest: find the cache dir (set CDC_RELAY_CACHE): %w", err)
			}
			cache = filepath.Join(home, ".cache", "cdc-relay")
		}
		dir = filepath.Join(cache, "debezium-"+Version, "libs")
	}
	for _, jar := range []string{"debezium-connector-postgres-" + Version + ".jar", "connect-runtime-" + ConnectVersion + ".jar", "connect-json-" + ConnectVersion + ".jar"} {
		if _, err := os.Stat(filepath.Join(dir, jar)); err != nil {
			return "", fmt.Errorf("debeziumtest: no %s in %s: run bash scripts/debezium.sh (make test-debezium does)", jar, dir)
		}
	}
	if _, err := exec.LookPath("java"); err != nil {
		return "", fmt.Errorf("debeziumtest: java is not on PATH: run make setup: %w", err)
	}
	return dir, nil
}

// ApicurioConverterVersion is the Apicurio Registry converter release
// scripts/debezium.sh installs (scripts/debezium/apicurio-converter.xml):
// an Avro converter for Kafka Connect on Maven Central, which Confluent's
// is not.
const ApicurioConverterVersion = "2.6.13.Final"

// ApicurioConverterDir returns the directory of the Apicurio converter's
// jars (without the Kafka, Jackson and logging jars Connect has):
// $CDC_RELAY_CACHE/apicurio-converter-<version>/libs, checked as LibsDir
// checks Debezium's.
func ApicurioConverterDir() (string, error) {
	cache, err := cacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, "apicurio-converter-"+ApicurioConverterVersion, "libs")
	jar := "apicurio-registry-utils-converter-" + ApicurioConverterVersion + ".jar"
	if _, err := os.Stat(filepath.Join(dir, jar)); err != nil {
		return "", fmt.Errorf("debeziumtest: no %s in %s: run bash scripts/debezium.sh (make test-debezium does)", jar, dir)
	}
	return dir, nil
}

// cacheDir is $CDC_RELAY_CACHE, else ~/.cache/cdc-relay.
func cacheDir() (string, error) {
	if cache := os.Getenv("CDC_RELAY_CACHE"); cache != "" {
		return cache, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("debeziumtest: find the cache dir (set CDC_RELAY_CACHE): %w", err)
	}
	return filepath.Join(home, ".cache", "cdc-relay"), nil
}

// classPath joins the jar directories as a class path of wildcards.
func classPath(libs string, extra []string) string {
	parts := []string{filepath.Join(libs, "*")}
	for _, d := range extra {
		parts = append(parts, filepath.Join(d, "*"))
	}
	return strings.Join(parts, string(os.PathListSeparator))
}
