package objectstore

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxKeyLength is the longest key accepted, in bytes (Azure's blob name limit).
const MaxKeyLength = 1024

// ValidateBucketName checks name against Azure's container naming rules, which every
// provider applies so that a bucket valid on one is valid on all: 3 to 63 characters of
// lower-case letters, digits and hyphens, starting with a letter or digit, not ending in a
// hyphen and without consecutive hyphens. The error wraps ErrInvalidBucketName and says
// which rule is broken.
func ValidateBucketName(name string) error {
	invalid := func(why string) error {
		return fmt.Errorf("%w %q: %s", ErrInvalidBucketName, name, why)
	}
	if n := len(name); n < 3 || n > 63 {
		if n > 63 {
			// Do not echo a very long name in full.
			return fmt.Errorf("%w (%d characters): must be 3 to 63 characters long", ErrInvalidBucketName, n)
		}
		return invalid(fmt.Sprintf("must be 3 to 63 characters long, not %d", n))
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '-':
			if i == 0 {
				return invalid("must start with a lower-case letter or a digit")
			}
			if name[i-1] == '-' {
				return invalid("must not contain consecutive hyphens")
			}
		default:
			return invalid(fmt.Sprintf("character %q at position %d is not a lower-case letter, digit or hyphen", rune(c), i))
		}
	}
	if name[len(name)-1] == '-' {
		return invalid("must not end with a hyphen")
	}
	return nil
}

// ValidateKey checks the rules every provider shares: a key is non-empty valid UTF-8 of at
// most MaxKeyLength bytes. Providers may add their own (local rejects paths that could
// leave the bucket directory). The error wraps ErrInvalidKey.
func ValidateKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty key", ErrInvalidKey)
	case len(key) > MaxKeyLength:
		return fmt.Errorf("%w: key of %d bytes is longer than %d", ErrInvalidKey, len(key), MaxKeyLength)
	case !utf8.ValidString(key):
		return fmt.Errorf("%w %q: not valid UTF-8", ErrInvalidKey, key)
	case strings.IndexByte(key, 0) >= 0:
		return fmt.Errorf("%w %q: contains a NUL byte", ErrInvalidKey, key)
	}
	return nil
}
