// Package keyslot computes Redis Cluster hash slots, the one implementation the engines,
// the stream key schema, the breakers and the cache share.
package keyslot

import "strings"

// Count is the number of Redis Cluster hash slots.
const Count = 16384

// crcTable is CRC16/XMODEM (polynomial 0x1021), Redis Cluster's key hash.
var crcTable = func() (t [256]uint16) {
	for i := range t {
		crc := uint16(i) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		t[i] = crc
	}
	return t
}()

// HashTag returns the hash tag of key: the bytes between its first '{' and the first '}'
// after it, when they are not empty; ok is false when key has none (its slot is then the
// whole key's).
func HashTag(key string) (tag string, ok bool) {
	i := strings.IndexByte(key, '{')
	if i < 0 {
		return "", false
	}
	j := strings.IndexByte(key[i+1:], '}')
	if j <= 0 {
		return "", false
	}
	return key[i+1 : i+1+j], true
}

// Of returns the hash slot of key: CRC16/XMODEM of its hash tag, or of the whole key when it
// has none, modulo Count.
func Of(key string) uint16 {
	if tag, ok := HashTag(key); ok {
		key = tag
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc = crc<<8 ^ crcTable[byte(crc>>8)^key[i]]
	}
	return crc & (Count - 1)
}
