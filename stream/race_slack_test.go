//go:build race

package stream_test

import "time"

func init() { sendSlack = 200 * time.Millisecond }
