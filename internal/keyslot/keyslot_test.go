package keyslot

import "testing"

// TestOf checks slots against values Redis gives (CLUSTER KEYSLOT) and the hash-tag rules.
func TestOf(t *testing.T) {
	for _, tc := range []struct {
		key  string
		want uint16
	}{
		{"", 0},
		{"foo", 12182},
		{"bar", 5061},
		{"123456789", 12739}, // the CRC16/XMODEM check value 0x31C3, modulo 16384
		{"{user1000}.following", 3443},
		{"{user1000}.followers", 3443},
		{"foo{}{bar}", 8363}, // an empty first tag: the whole key
		{"foo{{bar}}zap", 4015},
		{"foo{bar}{zap}", 5061},
	} {
		if got := Of(tc.key); got != tc.want {
			t.Errorf("Of(%q) = %d, want %d", tc.key, got, tc.want)
		}
	}
}
