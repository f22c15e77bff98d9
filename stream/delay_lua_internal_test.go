package stream

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/redstream-go/redstream/internal/redistest"
	"github.com/redstream-go/redstream/internal/streamwire"
)

// TestDelayMoveDecoderMatchesGo feeds delay_move.lua random encoded entries, valid ones and
// mutated ones (a foreign or corrupted writer), on a real redis-server: the script moves
// exactly the entries streamwire.DecodeFields accepts, with the same fields, and dead-letters the
// others with their payload intact.
func TestDelayMoveDecoderMatchesGo(t *testing.T) {
	c := redistest.Client(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	randString := func() string {
		b := make([]byte, rng.IntN(20))
		for i := range b {
			b[i] = byte(rng.IntN(256))
			if rng.IntN(4) == 0 {
				b[i] = ':'
			}
		}
		return string(b)
	}
	for round := range 300 + len(hostileEncodings) {
		stream := fmt.Sprintf("luadec-%d-%d", rng.Uint32(), round)
		sched, msgs := streamwire.DelayedKeys(stream)
		var fields []string
		for range 1 + rng.IntN(4) {
			fields = append(fields, randString(), randString())
		}
		enc := streamwire.EncodeFields(fields)
		if round >= 300 {
			enc = hostileEncodings[round-300]
		}
		switch rng.IntN(4) * min(1, max(0, 300-round)) {
		case 1: // cut short
			enc = enc[:rng.IntN(len(enc)+1)]
		case 2: // a byte changed
			if len(enc) > 0 {
				b := []byte(enc)
				b[rng.IntN(len(b))] = byte(rng.IntN(256))
				enc = string(b)
			}
		case 3: // bytes appended
			enc += randString()
		}
		want, werr := streamwire.DecodeFields(enc)
		if err := c.Do(ctx, c.B().Hset().Key(msgs).FieldValue().FieldValue("m", enc).Build()).Error(); err != nil {
			t.Fatal(err)
		}
		if err := c.Do(ctx, c.B().Zadd().Key(sched).ScoreMember().ScoreMember(1, "m").Build()).Error(); err != nil {
			t.Fatal(err)
		}
		r, err := moveDue(ctx, c, stream)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		got, _ := c.Do(ctx, c.B().Xrange().Key(stream).Start("-").End("+").Build()).AsXRangeSlices()
		dead, _ := c.Do(ctx, c.B().Xrange().Key(streamwire.DeadLetterStreamName(stream)).Start("-").End("+").Build()).AsXRangeSlices()
		if werr == nil {
			if r.moved != 1 || len(got) != 1 || len(dead) != 0 {
				t.Fatalf("round %d: %q decodes in Go to %q, but the script moved %d (stream %d, dead %d)", round, enc, want, r.moved, len(got), len(dead))
			}
			var fv []string
			for _, x := range got[0].FieldValues {
				fv = append(fv, x.Field, x.Value)
			}
			if !slices.Equal(fv, want) {
				t.Fatalf("round %d: script moved %q, Go decodes %q", round, fv, want)
			}
		} else {
			if r.invalid != 1 || len(got) != 0 || len(dead) != 1 || dead[0].FieldValues[0].Value != enc {
				t.Fatalf("round %d: %q is invalid in Go (%v), but the script: moved %d, invalid %d, stream %d, dead %d", round, enc, werr, r.moved, r.invalid, len(got), len(dead))
			}
		}
		_ = c.Do(ctx, c.B().Del().Key(stream, streamwire.DeadLetterStreamName(stream), sched, msgs).Build()).Error()
	}
}
