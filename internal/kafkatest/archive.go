package kafkatest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cdc-relay/cdc-relay/internal/testtier"
)

// The brokers a test starts map the classes they load from one
// class-data-sharing archive instead of parsing and verifying them from
// the jars: a broker's start then costs about a third less CPU (2.6 against
// 3.8 CPU s here, 2026-12-07), and make test starts some sixty brokers.
// make setup writes the archive (WriteArchive) beside the jars, one per
// JVM build. Without it, or when the JVM refuses it (it checks that the
// archive was written by the same JVM build from the same class path, and
// otherwise logs a warning and loads from the jars), brokers start as they
// did before.

// archivePath is the archive for the java on PATH and the jars in libs:
// its name holds the size and time of the JVM library, which change with
// the JVM build.
func archivePath(libs string) (string, error) {
	java, err := exec.LookPath("java")
	if err != nil {
		return "", err
	}
	if java, err = filepath.EvalSymlinks(java); err != nil {
		return "", err
	}
	jvm := filepath.Join(filepath.Dir(filepath.Dir(java)), "lib", "server", "libjvm.so")
	st, err := os.Stat(jvm)
	if err != nil {
		return "", fmt.Errorf("find the JVM library: %w", err)
	}
	name := "broker-" + strconv.FormatInt(st.Size(), 36) + "-" + strconv.FormatInt(st.ModTime().UnixNano(), 36) + ".jsa"
	return filepath.Join(filepath.Dir(libs), name), nil
}

// archiveFlags maps the archive into a JVM a test starts (testtier.Lean)
// when make setup has written it; nil otherwise.
func archiveFlags(libs string) []string {
	if !testtier.Lean() {
		return nil
	}
	path, err := archivePath(libs)
	if err != nil {
		return nil
	}
	if _, err := os.Stat(path); err != nil {
		return nil
	}
	return []string{"-XX:SharedArchiveFile=" + path}
}

// WriteArchive writes the class-data-sharing archive for the java on PATH,
// unless it exists, and returns its path. A broker started for it loads
// what a test's broker loads (a transactional producer, a consumer group,
// topic admin) and writes the classes it loaded when it exits.
func WriteArchive() (string, error) {
	libs, err := libsDir()
	if err != nil {
		return "", err
	}
	path, err := archivePath(libs)
	if err != nil {
		return "", fmt.Errorf("kafkatest: %w", err)
	}
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	tmp := path + ".tmp" + strconv.Itoa(os.Getpid())
	defer os.Remove(tmp)
	b, err := Start(Options{JVMOptions: []string{"-XX:ArchiveClassesAtExit=" + tmp}})
	if err != nil {
		return "", err
	}
	werr := exercise(b.Addr())
	if err := b.Close(); err != nil {
		return "", err
	}
	if werr != nil {
		return "", fmt.Errorf("kafkatest: archive workload: %w", werr)
	}
	if _, err := os.Stat(tmp); err != nil {
		return "", fmt.Errorf("kafkatest: the broker wrote no archive (see its log): %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("kafkatest: %w", err)
	}
	return path, nil
}

// exercise creates a topic, commits a transaction to it, and reads it back
// in a consumer group that commits its offsets.
func exercise(addr string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const topic = "archive"
	admin, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return err
	}
	defer admin.Close()
	if _, err := kadm.NewClient(admin).CreateTopic(ctx, 3, 1, nil, topic); err != nil {
		return err
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID("archive"), kgo.DefaultProduceTopic(topic))
	if err != nil {
		return err
	}
	defer prod.Close()
	if err := prod.BeginTransaction(); err != nil {
		return err
	}
	recs := make([]*kgo.Record, 100)
	for i := range recs {
		recs[i] = &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: []byte("v")}
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return err
	}
	if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return err
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumerGroup("archive"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	if err != nil {
		return err
	}
	defer cons.Close()
	for n := 0; n < len(recs); {
		fs := cons.PollFetches(ctx) // a cancelled ctx comes back as an error
		if errs := fs.Errors(); len(errs) > 0 {
			return errs[0].Err
		}
		n += fs.NumRecords()
	}
	return cons.CommitUncommittedOffsets(ctx)
}
