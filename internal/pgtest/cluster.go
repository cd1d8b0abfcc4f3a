package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	mathrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cdc-relay/cdc-relay/internal/testtier"
)

// BinDir is where Debian's postgresql-15 package installs the server.
const BinDir = "/usr/lib/postgresql/15/bin"

// DefaultVersion is the major version Start runs when Options.Version is 0:
// Debian's postgresql-15.
const DefaultVersion = 15

// Versions are the major versions the tests run: 15 from Debian, the others
// from Maven Central (io.zonky.test.postgres), installed by scripts/setup.sh.
var Versions = []int{13, 14, 15, 16, 17, 18}

// VersionBinDir returns the directory of initdb, pg_ctl and postgres for a
// major version. Version 15 is Debian's; the others are where
// scripts/setup.sh installs them: $CDC_RELAY_PG_ROOT/<major>, by default
// /opt/cdc-relay/postgresql/<major> as root (the postgres user must be able
// to read them), else ~/.cache/cdc-relay/postgresql/<major>.
func VersionBinDir(version int) string {
	if version == 0 || version == DefaultVersion {
		return BinDir
	}
	root := os.Getenv("CDC_RELAY_PG_ROOT")
	if root == "" && os.Geteuid() == 0 {
		root = "/opt/cdc-relay/postgresql"
	}
	if root == "" {
		cache := os.Getenv("CDC_RELAY_CACHE")
		if cache == "" {
			home, _ := os.UserHomeDir()
			cache = filepath.Join(home, ".cache", "cdc-relay")
		}
		root = filepath.Join(cache, "postgresql")
	}
	return filepath.Join(root, strconv.Itoa(version), "bin")
}

// Options tune Start. The zero value gives a logical-replication-ready cluster.
type Options struct {
	// Settings are extra server settings passed as -c name=value.
	Settings map[string]string
	// Port fixes the port; 0 picks a free one below 32768.
	Port int
	// Version is the major version (13 to 18); 0 means DefaultVersion.
	Version int
}

// Cluster is one running private PostgreSQL server.
type Cluster struct {
	dir    string
	port   int
	opts   Options
	uid    *user.User
	binDir string
}

// Start creates and starts a new cluster. It fails, never skips, when the
// server cannot be started.
func Start(opts Options) (*Cluster, error) {
	c, err := newCluster(opts)
	if err != nil {
		return nil, err
	}
	if _, err := c.run("initdb", "-D", c.dataDir(), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"); err != nil {
		return nil, err
	}
	if err := c.Start(); err != nil {
		return nil, err
	}
	return c, nil
}

// newCluster makes the directory (owned by the postgres user when running
// as root) and picks the port, creating nothing in it.
func newCluster(opts Options) (*Cluster, error) {
	if err := testtier.Check(); err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	if opts.Version == 0 {
		opts.Version = DefaultVersion
	}
	binDir := VersionBinDir(opts.Version)
	if _, err := os.Stat(filepath.Join(binDir, "postgres")); err != nil {
		return nil, fmt.Errorf("pgtest: PostgreSQL %d server not installed (%v): run `make setup`", opts.Version, err)
	}
	dir, err := os.MkdirTemp("", "cdc-relay-pg-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{dir: dir, opts: opts, binDir: binDir}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("pgtest: running as root needs the postgres user: %w", err)
		}
		c.uid = u
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chmod(dir, 0o700); err != nil {
			return nil, err
		}
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, err
		}
	}
	c.port = opts.Port
	if c.port == 0 {
		if c.port, err = freePort(); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Version is the cluster's major version.
func (c *Cluster) Version() int { return c.opts.Version }

func (c *Cluster) dataDir() string { return filepath.Join(c.dir, "data") }

// LogPath is the server log file.
func (c *Cluster) LogPath() string { return filepath.Join(c.dir, "server.log") }

// Port is the TCP port on 127.0.0.1.
func (c *Cluster) Port() int { return c.port }

// Dir is the cluster's base directory (data dir, socket and log live below it).
func (c *Cluster) Dir() string { return c.dir }

// URL returns a libpq URL for database db ("" means postgres) as superuser postgres.
func (c *Cluster) URL(db string) string {
	if db == "" {
		db = "postgres"
	}
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.port, db)
}

// Start starts the (stopped) server on its port and waits until it accepts connections.
func (c *Cluster) Start() error {
	args := []string{
		"-c listen_addresses=127.0.0.1",
		"-p " + strconv.Itoa(c.port),
		"-c unix_socket_directories=" + c.dir,
		"-c wal_level=logical",
		"-c max_replication_slots=40",
		"-c max_wal_senders=40",
		"-c max_connections=200",
		"-c fsync=off",
		"-c synchronous_commit=off",
		"-c full_page_writes=off",
	}
	for k, v := range c.opts.Settings {
		args = append(args, fmt.Sprintf("-c %s=%s", k, v))
	}
	_, err := c.run("pg_ctl", "-D", c.dataDir(), "-l", c.LogPath(), "-w", "-t", "60", "-o", strings.Join(args, " "), "start")
	return err
}

// Stop stops the server; mode is "fast", "immediate" or "smart" ("" = fast).
func (c *Cluster) Stop(mode string) error {
	if mode == "" {
		mode = "fast"
	}
	_, err := c.run("pg_ctl", "-D", c.dataDir(), "-m", mode, "-w", "-t", "60", "stop")
	return err
}

// Restart runs pg_ctl restart with the given mode ("fast", "immediate").
func (c *Cluster) Restart(mode string) error {
	if err := c.Stop(mode); err != nil {
		return err
	}
	return c.Start()
}

// Close stops the server immediately and removes its directory.
func (c *Cluster) Close() error {
	err := c.Stop("immediate")
	if rmErr := os.RemoveAll(c.dir); err == nil {
		err = rmErr
	}
	return err
}

// Exec runs SQL statements on database db.
func (c *Cluster) Exec(ctx context.Context, db, sql string, args ...any) error {
	conn, err := pgx.Connect(ctx, c.URL(db))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql, args...)
	return err
}

// CreateDatabase creates a database and returns its URL.
func (c *Cluster) CreateDatabase(ctx context.Context, name string) (string, error) {
	if err := c.Exec(ctx, "", "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	return c.URL(name), nil
}

// LogTail returns the last n bytes of the server log, for failure messages.
func (c *Cluster) LogTail(n int) string {
	b, err := os.ReadFile(c.LogPath())
	if err != nil {
		return err.Error()
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

func (c *Cluster) run(tool string, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(c.binDir, tool), args...)
	if c.uid != nil {
		uid, _ := strconv.Atoi(c.uid.Uid)
		gid, _ := strconv.Atoi(c.uid.Gid)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
		cmd.Env = append(os.Environ(), "HOME="+c.dir)
	}
	cmd.Dir = c.dir
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("pgtest: %s %s: %w\n%s\n%s", tool, strings.Join(args, " "), err, out.String(), c.LogTail(2000))
	}
	return out.String(), nil
}

// freePort returns a free port below the kernel's ephemeral range
// (32768-60999): a port the kernel handed out as free could be taken by an
// outgoing connection before a restarted server binds it again.
func freePort() (int, error) {
	for range 200 {
		port := 20000 + mathrand.IntN(12000)
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		l.Close()
		return port, nil
	}
	return 0, errors.New("pgtest: no free port between 20000 and 32000")
}

// WaitFor polls cond every 20 ms until it returns true or the deadline passes.
func WaitFor(ctx context.Context, timeout time.Duration, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	var last error
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("condition not met within %s: %w", timeout, last)
			}
			return errors.New("condition not met within " + timeout.String())
		case <-t.C:
		}
	}
}

// Connect opens a connection to database db ("" means postgres).
func (c *Cluster) Connect(ctx context.Context, db string) (*pgx.Conn, error) {
	return pgx.Connect(ctx, c.URL(db))
}
