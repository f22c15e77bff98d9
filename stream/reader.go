package stream

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
)

// reader reads new entries (XREADGROUP ... >) for the handler. Credit-based read-ahead: it
// asks for no more entries than the handler has free slots (Concurrency + ReadCount minus
// the entries in hand), so no entry waits long behind busy handlers, and it waits while
// there is no free slot or the consumer is paused.
func (h *handlerRT) reader() {
	defer h.producers.Done()
	c := h.c
	if h.takeover && !h.catchUp() {
		return
	}
	failures := 0
	for {
		if !h.waitResumed() {
			return
		}
		n := h.reserve(c.cfg.ReadCount)
		if n == 0 {
			select {
			case <-h.wake:
				continue
			case <-h.runCtx.Done():
				return
			}
		}
		entries, err := h.read(n)
		if err != nil {
			h.unreserve(n)
			if h.runCtx.Err() != nil {
				return
			}
			if errors.Is(err, context.Canceled) {
				continue // interrupted by Pause
			}
			if isNoGroup(err) {
				h.recoverGroup()
			} else {
				h.m.backgroundError(opRead)
				err = fmt.Errorf("stream: read %q as %s/%s: %w", h.stream, h.group, c.name, err)
				h.readState.fail(h.log, "stream: reads fail", err)
				c.report(err)
			}
			failures++
			if !h.sleep(connBackoff(failures)) {
				return
			}
			continue
		}
		failures = 0
		h.lastRead.Store(time.Now().UnixNano())
		h.readState.ok(h.log, "stream: reads work again")
		for _, e := range entries {
			h.dispatch(job{e: e, deliveries: 1})
		}
		h.unreserve(n - len(entries))
	}
}

// errReadTimeout is a read that outlived BlockTimeout + readSlack (a hung server).
var errReadTimeout = errors.New("no reply within the block timeout")

// read runs one XREADGROUP of at most n entries, interruptible by Close and Pause. Its
// context has no deadline but a timer: rueidis aborts a blocking command on cancellation
// only (a deadline would wait for the socket's own timeout).
func (h *handlerRT) read(n int) ([]entry, error) {
	c := h.c
	ctx, cancel := context.WithCancel(h.runCtx)
	defer cancel()
	var timedOut atomic.Bool
	timer := time.AfterFunc(c.cfg.BlockTimeout+readSlack, func() { timedOut.Store(true); cancel() })
	defer timer.Stop()
	h.mu.Lock()
	h.readCancel = cancel
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.readCancel = nil
		h.mu.Unlock()
	}()
	if c.isPaused() {
		return nil, context.Canceled
	}
	cl := c.client
	cmd := cl.B().Xreadgroup().Group(h.group, c.name).Count(int64(n)).Block(max(c.cfg.BlockTimeout.Milliseconds(), 1)).
		Streams().Key(h.stream).Id(">").Build()
	entries, err := parseXRead(cl.Do(ctx, cmd), h.stream)
	if rueidis.IsRedisNil(err) {
		return nil, nil
	}
	if err != nil && timedOut.Load() {
		return nil, errReadTimeout
	}
	return entries, err
}

// cancelRead interrupts the read in progress, if any.
func (h *handlerRT) cancelRead() {
	h.mu.Lock()
	if h.readCancel != nil {
		h.readCancel()
	}
	h.mu.Unlock()
}

// parseXRead returns the entries of stream in an XREADGROUP reply (RESP2 or RESP3).
func parseXRead(res rueidis.RedisResult, stream string) ([]entry, error) {
	streams, err := res.AsXReadSlices()
	if err != nil {
		return nil, err
	}
	return toEntries(streams[stream]), nil
}

// parseEntries parses an array of [id, [field, value, ...]] entries (XRANGE, XCLAIM).
// Entries whose fields are nil (deleted while pending) are skipped.
func parseEntries(list rueidis.RedisMessage) ([]entry, error) {
	items, err := list.AsXRangeSlices()
	if err != nil {
		return nil, err
	}
	return toEntries(items), nil
}

func toEntries(items []rueidis.XRangeSlice) []entry {
	out := make([]entry, 0, len(items))
	for _, it := range items {
		if it.FieldValues == nil {
			continue
		}
		out = append(out, toEntry(it))
	}
	return out
}

func toEntry(it rueidis.XRangeSlice) entry {
	fields := make([]string, 0, 2*len(it.FieldValues))
	for _, fv := range it.FieldValues {
		fields = append(fields, fv.Field, fv.Value)
	}
	return entry{id: it.ID, fields: fields}
}

// parseEntry parses one [id, [field, value, ...]] pair given as its two elements, as the
// scripts reply them.
func parseEntry(idMsg, fieldsMsg rueidis.RedisMessage) (entry, bool) {
	id, err := idMsg.ToString()
	if err != nil {
		return entry{}, false
	}
	fv, err := fieldsMsg.AsStrSlice()
	if err != nil {
		return entry{}, false
	}
	return entry{id: id, fields: fv}, true
}
