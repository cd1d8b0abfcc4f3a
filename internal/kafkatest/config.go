package kafkatest

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Version is the Apache Kafka version that scripts/setup.sh installs. It must
// equal kafka.version in scripts/kafka/pom.xml (a test checks this).
const Version = "4.4.0"

// libsDir returns the directory holding the broker jars, checking that it
// holds the Kafka core jar and that java is on PATH.
func libsDir() (string, error) {
	dir := os.Getenv("CDC_RELAY_KAFKA_LIBS")
	if dir == "" {
		cache := os.Getenv("CDC_RELAY_CACHE")
		if cache == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return "", fmt.Errorf("kafkatest: find the cache dir (set CDC_RELAY_CACHE): %w", err)
			}
			cache = filepath.Join(home, ".cache", "cdc-relay")
		}
		dir = filepath.Join(cache, "kafka-"+Version, "libs")
	}
	jars, _ := filepath.Glob(filepath.Join(dir, "kafka_2.13-*.jar"))
	if len(jars) == 0 {
		return "", fmt.Errorf("kafkatest: no Kafka jars in %s: run `make setup` (or scripts/setup.sh)", dir)
	}
	if _, err := exec.LookPath("java"); err != nil {
		return "", fmt.Errorf("kafkatest: java is not on PATH: run `make setup` (or scripts/setup.sh): %w", err)
	}
	return dir, nil
}

// properties renders server.properties for a combined broker and controller
// listening on ports.plain (PLAINTEXT) and ports.controller (CONTROLLER),
// plus the SASL and TLS listeners whose ports are set; dir holds their key
// and trust stores.
func properties(opts Options, dir, dataDir string, ports listenerPorts) string {
	listen := "127.0.0.1:" + strconv.Itoa(ports.plain)
	ctrl := "127.0.0.1:" + strconv.Itoa(ports.controller)
	adv := listen
	if opts.AdvertisedHost != "" {
		adv = opts.AdvertisedHost
	}
	// The extra listeners advertise their real address; PLAINTEXT stays the
	// inter-broker listener, so the single node never authenticates to itself.
	extra, protocols := securityListeners(ports)
	p := map[string]string{
		"process.roles":                       "broker,controller",
		"node.id":                             "1",
		"controller.quorum.bootstrap.servers": ctrl,
		"listeners":                           strings.Join(append([]string{"PLAINTEXT://" + listen, "CONTROLLER://" + ctrl}, extra...), ","),
		"advertised.listeners":                strings.Join(append([]string{"PLAINTEXT://" + adv, "CONTROLLER://" + ctrl}, extra...), ","),
		"listener.security.protocol.map":      strings.Join(append([]string{"PLAINTEXT:PLAINTEXT", "CONTROLLER:PLAINTEXT"}, protocols...), ","),
		"controller.listener.names":           "CONTROLLER",
		"inter.broker.listener.name":          "PLAINTEXT",
		"log.dirs":                            dataDir,
		"auto.create.topics.enable":           "true",
		"num.partitions":                      "1",
		"default.replication.factor":          "1",
		"min.insync.replicas":                 "1",
		"group.initial.rebalance.delay.ms":    "0",
		// After a SIGKILL the restarted broker can only register once the
		// old session expired (default 9 s): shorten it, heartbeat often.
		"broker.heartbeat.interval.ms":                     "500",
		"broker.session.timeout.ms":                        "4000",
		"offsets.topic.replication.factor":                 "1",
		"offsets.topic.num.partitions":                     "1",
		"transaction.state.log.replication.factor":         "1",
		"transaction.state.log.min.isr":                    "1",
		"transaction.state.log.num.partitions":             "1",
		"share.coordinator.state.topic.replication.factor": "1",
		"share.coordinator.state.topic.min.isr":            "1",
		"share.coordinator.state.topic.num.partitions":     "1",
	}
	if opts.MessageMaxBytes > 0 {
		p["message.max.bytes"] = strconv.Itoa(opts.MessageMaxBytes)
	}
	for k, v := range securityProperties(opts, dir, ports) {
		p[k] = v
	}
	for k, v := range opts.ExtraConfig {
		p[k] = v
	}
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, p[k])
	}
	return b.String()
}

// log4jConfig sends the broker's logs to standard output (the log file) at
// INFO, with the noisiest loggers turned down.
const log4jConfig = `status = warn
appender.out.type = Console
appender.out.name = out
appender.out.target = SYSTEM_OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.out.ref = out
logger.request.name = kafka.request.logger
logger.request.level = warn
logger.authorizer.name = kafka.authorizer.logger
logger.authorizer.level = warn
`

// newClusterID returns a random cluster id in Kafka's format: 16 bytes,
// base64url without padding, never starting with '-' (which the storage
// tool's argument parser would take for an option).
func newClusterID() (string, error) {
	for {
		var u [16]byte
		if _, err := rand.Read(u[:]); err != nil {
			return "", fmt.Errorf("kafkatest: cluster id: %w", err)
		}
		if id := base64.RawURLEncoding.EncodeToString(u[:]); !strings.HasPrefix(id, "-") {
			return id, nil
		}
	}
}

// writeConfig writes server.properties and log4j2.properties into dir.
func writeConfig(dir, props string) error {
	err := errors.Join(
		os.WriteFile(filepath.Join(dir, "server.properties"), []byte(props), 0o644),
		os.WriteFile(filepath.Join(dir, "log4j2.properties"), []byte(log4jConfig), 0o644),
	)
	if err != nil {
		return fmt.Errorf("kafkatest: write config: %w", err)
	}
	return nil
}
