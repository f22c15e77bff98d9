package cache

import "encoding/json"

// Codec turns values into the bytes stored in Redis and back. Implementations must be safe
// for concurrent use. Unmarshal must not retain data after it returns.
//
// Every Cache uses one Codec for all its keys; Get and GetOrLoad decode into the T the
// caller names, so a Codec must be able to decode what it encoded into that type.
type Codec interface {
	// Marshal encodes v. An error means v cannot be stored; Set and GetOrLoad return it
	// wrapped in ErrEncode.
	Marshal(v any) ([]byte, error)
	// Unmarshal decodes data into the value v points to. An error makes Get and GetOrLoad
	// return ErrDecode (never a miss).
	Unmarshal(data []byte, v any) error
}

// defaultCodec is the Codec of a nil Config.Codec: encoding/json. A value it cannot encode
// (a channel, a function, a NaN float, a cyclic structure) is an ErrEncode error.
var defaultCodec Codec = jsonCodec{}

type jsonCodec struct{}

func (jsonCodec) Marshal(v any) ([]byte, error)      { return json.Marshal(v) }
func (jsonCodec) Unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }
