package httpidem

import (
	"errors"
	"strings"
)

// maxKeyLen bounds an Idempotency-Key, in characters (Stripe's bound).
const maxKeyLen = 255

var (
	errNotString = errors.New("the Idempotency-Key field is not a structured-field String")
	errKeyLength = errors.New("the Idempotency-Key is empty or longer than 255 characters")
)

// parseKey parses the value of the Idempotency-Key field: an RFC 9651 Item whose bare item
// is a String ("8e03978e-40d5-43e8-bc93-6894a57f9324"), with optional parameters, which are
// ignored; spaces around it are discarded (RFC 9651 section 4.2). Several field lines (the
// caller joins them with ", ") are not one Item and fail. It returns the string's value:
// 1 to 255 printable ASCII characters.
func parseKey(v string) (string, error) {
	s := strings.TrimLeft(v, " ")
	key, rest, err := parseString(s)
	if err != nil {
		return "", err
	}
	if rest, err = skipParams(rest); err != nil {
		return "", err
	}
	if strings.TrimLeft(rest, " ") != "" {
		return "", errNotString
	}
	if len(key) == 0 || len(key) > maxKeyLen {
		return "", errKeyLength
	}
	return key, nil
}

// parseString parses an sf-string at the start of s (RFC 9651 section 4.2.5) and returns its
// value and the rest of s.
func parseString(s string) (string, string, error) {
	if len(s) == 0 || s[0] != '"' {
		return "", s, errNotString
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\':
			i++
			if i == len(s) || (s[i] != '"' && s[i] != '\\') {
				return "", s, errNotString
			}
			b.WriteByte(s[i])
		case c == '"':
			return b.String(), s[i+1:], nil
		case c < 0x20 || c > 0x7e:
			return "", s, errNotString
		default:
			b.WriteByte(c)
		}
	}
	return "", s, errNotString
}

// skipParams skips the parameters at the start of s (RFC 9651 section 4.2.3.2):
// *( ";" *SP key [ "=" bare-item ] ).
func skipParams(s string) (string, error) {
	for len(s) > 0 && s[0] == ';' {
		s = strings.TrimLeft(s[1:], " ")
		n := 0
		for n < len(s) && (isLCAlpha(s[n]) || s[n] == '*' || (n > 0 && (isDigit(s[n]) || strings.IndexByte("_-.", s[n]) >= 0))) {
			n++
		}
		if n == 0 {
			return s, errNotString
		}
		s = s[n:]
		if len(s) > 0 && s[0] == '=' {
			var err error
			if s, err = skipBareItem(s[1:]); err != nil {
				return s, err
			}
		}
	}
	return s, nil
}

// skipBareItem skips one bare item at the start of s: an Integer or Decimal, a String, a
// Token, a Byte Sequence, a Boolean, a Date or a Display String (RFC 9651 section 4.2.3.1).
func skipBareItem(s string) (string, error) {
	if s == "" {
		return s, errNotString
	}
	switch c := s[0]; {
	case c == '-' || isDigit(c):
		i := 0
		if c == '-' {
			i++
		}
		return skipNumber(s, i)
	case c == '@':
		if len(s) > 1 && (s[1] == '-' || isDigit(s[1])) {
			i := 1
			if s[1] == '-' {
				i++
			}
			return skipNumber(s, i)
		}
		return s, errNotString
	case c == '"':
		_, rest, err := parseString(s)
		return rest, err
	case c == '%':
		return skipDisplayString(s)
	case c == '?':
		if len(s) > 1 && (s[1] == '0' || s[1] == '1') {
			return s[2:], nil
		}
		return s, errNotString
	case c == ':':
		for i := 1; i < len(s); i++ {
			switch d := s[i]; {
			case d == ':':
				return s[i+1:], nil
			case isAlpha(d) || isDigit(d) || d == '+' || d == '/' || d == '=':
			default:
				return s, errNotString
			}
		}
		return s, errNotString
	case isAlpha(c) || c == '*':
		i := 1
		for i < len(s) && (isTChar(s[i]) || s[i] == ':' || s[i] == '/') {
			i++
		}
		return s[i:], nil
	}
	return s, errNotString
}

// skipNumber skips the digits of an Integer (at most 15) or a Decimal (at most 12 integer
// and 3 fractional digits) starting at s[i].
func skipNumber(s string, i int) (string, error) {
	start, dot := i, -1
	for ; i < len(s); i++ {
		if isDigit(s[i]) {
			continue
		}
		if s[i] == '.' && dot < 0 {
			dot = i
			continue
		}
		break
	}
	switch {
	case i == start:
		return s, errNotString
	case dot < 0 && i-start > 15:
		return s, errNotString
	case dot >= 0 && (dot-start > 12 || i-dot-1 < 1 || i-dot-1 > 3):
		return s, errNotString
	}
	return s[i:], nil
}

// skipDisplayString skips %"..." with its %xx escapes of lowercase hex digits.
func skipDisplayString(s string) (string, error) {
	if len(s) < 2 || s[1] != '"' {
		return s, errNotString
	}
	for i := 2; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			return s[i+1:], nil
		case c == '%':
			if i+2 >= len(s) || !isLCHex(s[i+1]) || !isLCHex(s[i+2]) {
				return s, errNotString
			}
			i += 2
		case c < 0x20 || c > 0x7e:
			return s, errNotString
		}
	}
	return s, errNotString
}

func isDigit(c byte) bool   { return c >= '0' && c <= '9' }
func isLCAlpha(c byte) bool { return c >= 'a' && c <= 'z' }
func isAlpha(c byte) bool   { return isLCAlpha(c) || (c >= 'A' && c <= 'Z') }
func isLCHex(c byte) bool   { return isDigit(c) || (c >= 'a' && c <= 'f') }

// isTChar reports whether c is a tchar of RFC 9110.
func isTChar(c byte) bool {
	return isAlpha(c) || isDigit(c) || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// appendString appends s as an sf-string: printable ASCII, with '"' and '\' escaped.
// s must be printable ASCII (a parsed key is).
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\\' {
			b = append(b, '\\')
		}
		b = append(b, s[i])
	}
	return append(b, '"')
}
