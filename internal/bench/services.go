package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"

	"github.com/cdc-relay/cdc-relay/internal/kafkatest"
	"github.com/cdc-relay/cdc-relay/internal/pgtest"
	"github.com/cdc-relay/cdc-relay/internal/rabbittest"
	"github.com/cdc-relay/cdc-relay/internal/registrytest"
)

// services are the private PostgreSQL, Kafka and schema registry, or with
// --broker rabbitmq PostgreSQL and a RabbitMQ node (rabbit.go).
type services struct {
	pg        *pgtest.Cluster
	broker    *kafkatest.Broker
	registry  *registrytest.Registry
	rabbit    *rabbittest.Node
	brokerPID int    // the broker's java (or Erlang) process, for its CPU time; 0 if not found
	gcLog     string // the broker's GC log (-Xlog:gc, read by readGCPauses)
}

// startServices starts the three services in parallel. On error the
// services that did start are returned too, so that close stops them.
func startServices(partitions int, brokerConfig [][2]string, jvm []string) (*services, error) {
	gcDir, err := os.MkdirTemp("", "cdc-relay-bench-gc-")
	if err != nil {
		return nil, err
	}
	s := &services{gcLog: filepath.Join(gcDir, "broker-gc.log")}
	jvm = append([]string{"-Xlog:gc:file=" + s.gcLog + ":utctime"}, jvm...)
	var wg sync.WaitGroup
	var pgErr, kafkaErr, regErr error
	wg.Add(3)
	go func() {
		defer wg.Done()
		s.pg, pgErr = pgtest.Start(pgtest.Options{})
	}()
	go func() {
		defer wg.Done()
		cfg := map[string]string{"num.partitions": strconv.Itoa(partitions)}
		for _, kv := range brokerConfig {
			cfg[kv[0]] = kv[1]
		}
		s.broker, kafkaErr = kafkatest.Start(kafkatest.Options{
			ExtraConfig: cfg,
			JVMOptions:  append(slices.Clip(brokerJVM), jvm...),
		})
	}()
	go func() {
		defer wg.Done()
		s.registry, regErr = registrytest.Start()
	}()
	wg.Wait()
	switch {
	case pgErr != nil:
		return s, fmt.Errorf("start PostgreSQL: %w", pgErr)
	case kafkaErr != nil:
		return s, fmt.Errorf("start Kafka: %w", kafkaErr)
	case regErr != nil:
		return s, fmt.Errorf("start schema registry: %w", regErr)
	}
	s.brokerPID = pidWithCwd(s.broker.Dir())
	return s, nil
}

// close stops every service that was started and removes its files.
func (s *services) close() {
	if s == nil {
		return
	}
	if s.pg != nil {
		s.pg.Close()
	}
	if s.broker != nil {
		s.broker.Close()
	}
	if s.gcLog != "" {
		os.RemoveAll(filepath.Dir(s.gcLog))
	}
	if s.registry != nil {
		s.registry.Close()
	}
	if s.rabbit != nil {
		s.rabbit.Close()
	}
}

// pidWithCwd finds the process whose working directory is dir: kafkatest
// runs the broker's java process in its own directory. It returns 0 when
// there is none.
func pidWithCwd(dir string) int {
	want, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return 0
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd")); err == nil && cwd == want {
			return pid
		}
	}
	return 0
}
