package main

// The latency anchor: pg_recvlogical on a slot of its own, streaming the
// same pgoutput as the relay reads to a pipe, next to the relay under the
// same writers. The benchmark parses that stream and timestamps each
// inserted row's id when its message arrives: commit -> pg_recvlogical is
// the latency of PostgreSQL's own client doing no work per event, the
// ceiling of any logical-decoding client.

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/cdc-relay/cdc-relay/internal/pgtest"
)

// anchor is the running pg_recvlogical and the goroutine reading its output.
type anchor struct {
	c    *child
	done chan struct{}
	err  error // the reader's, valid once done is closed
}

// startAnchor runs pg_recvlogical on slot (created already) writing to a
// pipe and records in ev.anchor, per outbox id, when its insert arrived.
func startAnchor(ctx context.Context, db *database, slot string, ev *eventTimes) (*anchor, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("pipe for pg_recvlogical: %w", err)
	}
	// -F 0: no fsync of the output (a pipe); -s 1: its status updates
	// confirm what it read every second.
	args := []string{"-d", db.url, "--slot", slot, "--start", "--plugin", "pgoutput",
		"-o", "proto_version=1", "-o", "publication_names=" + publication,
		"-f", "-", "-F", "0", "-s", "1"}
	c, err := startChildOut(ctx, "pg_recvlogical", filepath.Join(pgtest.BinDir, "pg_recvlogical"), args, nil, w)
	w.Close() // the child holds its own copy
	if err != nil {
		r.Close()
		return nil, err
	}
	a := &anchor{c: c, done: make(chan struct{})}
	go func() {
		defer close(a.done)
		defer r.Close()
		a.err = readPgoutput(bufio.NewReaderSize(r, 256<<10), func(id int64) {
			if k := ev.index(id); k >= 0 {
				ev.anchor[k].CompareAndSwap(0, time.Now().UnixNano())
			}
		})
	}()
	return a, nil
}

// stop kills pg_recvlogical and waits for the reader; it returns the
// reader's error, if any. The kill may cut the last message short, which
// is no error.
func (a *anchor) stop() error {
	a.c.kill()
	<-a.done
	if a.err != nil && !cutShort(a.err) {
		return a.c.failure("read its output: %v", a.err)
	}
	return nil
}

// cutShort reports whether readPgoutput failed because its stream ended
// inside a message.
func cutShort(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// readPgoutput parses pg_recvlogical's output of a pgoutput stream
// (protocol version 1): each message's bytes followed by a newline. It
// calls insert with the first column of each inserted row (the outbox id)
// and returns nil at the end of the stream.
func readPgoutput(r *bufio.Reader, insert func(id int64)) error {
	p := pgoutputParser{r: r}
	for {
		kind, err := r.ReadByte()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		switch kind {
		case 'B': // final LSN, commit time, xid
			p.skip(8 + 8 + 4)
		case 'C': // flags, commit LSN, end LSN, commit time
			p.skip(1 + 8 + 8 + 8)
		case 'O': // origin LSN, name
			p.skip(8)
			p.cstring()
		case 'Y': // type oid, namespace, name
			p.skip(4)
			p.cstring()
			p.cstring()
		case 'R': // relation oid, namespace, name, replica identity, columns
			p.skip(4)
			p.cstring()
			p.cstring()
			p.skip(1)
			for n := p.int16(); n > 0 && p.err == nil; n-- {
				p.skip(1) // flags
				p.cstring()
				p.skip(4 + 4) // type oid, type modifier
			}
		case 'M': // flags, LSN, prefix, content
			p.skip(1 + 8)
			p.cstring()
			p.skip(int(p.int32()))
		case 'I': // relation oid, 'N', the new tuple
			p.skip(4)
			if b := p.byte(); p.err == nil && b != 'N' {
				return fmt.Errorf("pgoutput insert: tuple kind %q, want 'N'", b)
			}
			first, err := p.tuple()
			if err != nil {
				return err
			}
			id, err := strconv.ParseInt(first, 10, 64)
			if err != nil {
				return fmt.Errorf("pgoutput insert: first column %q is not an id", first)
			}
			insert(id)
		default:
			return fmt.Errorf("pgoutput: unexpected message %q", kind)
		}
		if b := p.byte(); p.err == nil && b != '\n' {
			return fmt.Errorf("pgoutput: message %q not followed by a newline", kind)
		}
		if p.err != nil {
			return fmt.Errorf("pgoutput message %q: %w", kind, p.err)
		}
	}
}

// pgoutputParser reads pgoutput's fields; the first error sticks.
type pgoutputParser struct {
	r   *bufio.Reader
	err error
	buf [4]byte
}

func (p *pgoutputParser) skip(n int) {
	if p.err == nil {
		_, p.err = p.r.Discard(n)
	}
}

func (p *pgoutputParser) byte() byte {
	if p.err != nil {
		return 0
	}
	var b byte
	b, p.err = p.r.ReadByte()
	return b
}

func (p *pgoutputParser) int16() int {
	if p.err == nil {
		_, p.err = io.ReadFull(p.r, p.buf[:2])
	}
	if p.err != nil {
		return 0
	}
	return int(int16(binary.BigEndian.Uint16(p.buf[:2])))
}

func (p *pgoutputParser) int32() int32 {
	if p.err == nil {
		_, p.err = io.ReadFull(p.r, p.buf[:4])
	}
	if p.err != nil {
		return 0
	}
	return int32(binary.BigEndian.Uint32(p.buf[:4]))
}

func (p *pgoutputParser) cstring() {
	if p.err == nil {
		_, p.err = p.r.ReadSlice(0)
	}
}

// tuple reads TupleData and returns its first column's text.
func (p *pgoutputParser) tuple() (string, error) {
	var first string
	n := p.int16()
	for i := 0; i < n && p.err == nil; i++ {
		switch kind := p.byte(); kind {
		case 'n', 'u': // null, unchanged TOAST
		case 't', 'b':
			l := int(p.int32())
			if p.err != nil {
				break
			}
			if l < 0 {
				return "", fmt.Errorf("pgoutput tuple: column length %d", l)
			}
			if i == 0 {
				b := make([]byte, l)
				_, p.err = io.ReadFull(p.r, b)
				first = string(b)
			} else {
				p.skip(l)
			}
		default:
			if p.err == nil {
				return "", fmt.Errorf("pgoutput tuple: column kind %q", kind)
			}
		}
	}
	if p.err != nil {
		return "", fmt.Errorf("pgoutput tuple: %w", p.err)
	}
	return first, nil
}
