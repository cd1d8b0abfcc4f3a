package debeziumtest

import (
	"os"
	"strconv"
	"sync"
	"testing"

	"github.com/cdc-relay/cdc-relay/internal/kafkatest"
	"github.com/cdc-relay/cdc-relay/internal/pgtest"
	"github.com/cdc-relay/cdc-relay/internal/testtier"
)

// The package's PostgreSQL and Kafka (partitions per topic: capPartitions),
// started by the first test that needs them and stopped by TestMain.
var (
	svcOnce   sync.Once
	svcPG     *pgtest.Cluster
	svcBroker *kafkatest.Broker
	svcErr    error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if svcPG != nil {
		svcPG.Close()
	}
	if svcBroker != nil {
		svcBroker.Close()
	}
	os.Exit(code)
}

// services starts PostgreSQL and Kafka once; a test that cannot have them
// fails, and skips while the service tier is off (testtier).
func services(t *testing.T) (*pgtest.Cluster, *kafkatest.Broker) {
	t.Helper()
	testtier.Need(t)
	svcOnce.Do(func() {
		var wg sync.WaitGroup
		var pgErr, kErr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			svcPG, pgErr = pgtest.Start(pgtest.Options{})
		}()
		go func() {
			defer wg.Done()
			svcBroker, kErr = kafkatest.Start(kafkatest.Options{ExtraConfig: map[string]string{"num.partitions": strconv.Itoa(capPartitions)}})
		}()
		wg.Wait()
		if pgErr != nil {
			svcErr = pgErr
		} else {
			svcErr = kErr
		}
	})
	if svcErr != nil {
		t.Fatal(svcErr)
	}
	return svcPG, svcBroker
}
