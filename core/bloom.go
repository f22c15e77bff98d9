package core

import (
	"fmt"
	"math"

	"github.com/redstream-go/redstream/internal/corekit"
)

// Bloom holds the parameters of a Bloom filter split into Shards equal blocks of ShardBits
// bits each (one block per storage key). An element lives in exactly one shard, so checking
// or adding it touches one key.
//
// Sizing, for n expected insertions at false-positive rate p:
//
//	m = ceil(-n ln p / (ln 2)^2)    k = max(1, round(m/n ln 2))
//
// and ShardBits = ceil(m / Shards).
//
// Positions of an element e (its bytes), with (h1, h2) = MurmurHash3_x64_128(e, 0):
//
//	shard  = ((h1 >> 32) * Shards) >> 32
//	pos[i] = (h1 + i*h2) mod ShardBits,   i = 0 .. K-1, unsigned 64-bit wrapping arithmetic
type Bloom struct {
	Insertions int64   // n, the expected number of distinct elements
	FPRate     float64 // p, the target false-positive rate
	K          int     // hash functions (bits per element)
	Bits       uint64  // m, the total number of bits before sharding
	Shards     int     // number of blocks; 1 unless requested
	ShardBits  uint64  // bits per block
}

// MinFPRate is the smallest accepted false-positive rate. Below it the sizing would need
// logarithms of numbers so small that runtimes disagree (math.Log of subnormals differs
// between amd64 and wasm), and the filter would be larger than any deduplicator needs.
const MinFPRate = 1e-12

// MaxShardBits is the largest block: 2^32 bits, the 512 MB limit of one Redis string.
const MaxShardBits uint64 = 1 << 32

// NewBloom sizes a filter for n > 0 expected insertions at false-positive rate MinFPRate <= p < 1.
// shards (>= 1; 0 means 1) splits the bits into that many blocks; when one block would
// exceed MaxShardBits the number of shards is raised until it fits.
func NewBloom(n int64, p float64, shards int) (Bloom, error) {
	if n <= 0 || n > MaxCount {
		return Bloom{}, badConfig("expectedInsertions", n, fmt.Sprintf("in [1, %d]", MaxCount))
	}
	if !(p > 0 && p < 1) {
		return Bloom{}, badConfig("falseProbability", p, "in the open interval (0, 1)")
	}
	if p < MinFPRate {
		return Bloom{}, badConfig("falseProbability", p, fmt.Sprintf("at least %g", MinFPRate))
	}
	if shards < 0 || shards > 1<<16 {
		return Bloom{}, badConfig("shards", shards, "in [0, 65536]")
	}
	if shards == 0 {
		shards = 1
	}
	ln2 := math.Ln2
	m := math.Ceil(-float64(n) * math.Log(p) / (ln2 * ln2))
	if m > float64(MaxShardBits)*(1<<16) {
		return Bloom{}, fmt.Errorf("%w: a filter of %.0f bits is too large", ErrInvalidConfig, m)
	}
	k := int(math.Round(m / float64(n) * ln2))
	if k < 1 {
		k = 1
	}
	b := Bloom{Insertions: n, FPRate: p, K: k, Bits: uint64(m), Shards: shards}
	for {
		b.ShardBits = (b.Bits + uint64(b.Shards) - 1) / uint64(b.Shards)
		if b.ShardBits <= MaxShardBits {
			return b, nil
		}
		b.Shards++
	}
}

// Locate returns the element's shard and appends its K bit positions within that shard to
// pos (pass a reused slice to avoid allocation).
func (b Bloom) Locate(elem []byte, pos []uint64) (int, []uint64) {
	h1, h2 := corekit.Murmur3x64_128(elem, 0)
	shard := int(((h1 >> 32) * uint64(b.Shards)) >> 32)
	for i := 0; i < b.K; i++ {
		pos = append(pos, (h1+uint64(i)*h2)%b.ShardBits)
	}
	return shard, pos
}

// EstimateCount estimates the number of distinct elements in one shard of ShardBits bits of
// which ones are set (Swamidass & Baldi): -(m/k) ln(1 - X/m). It returns MaxCount when the
// shard is full.
func (b Bloom) EstimateCount(ones uint64) int64 {
	m := float64(b.ShardBits)
	if ones >= b.ShardBits {
		return MaxCount
	}
	return int64(math.Round(-m / float64(b.K) * math.Log(1-float64(ones)/m)))
}
