package catalog

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"switchyard/config"
)

// KeyPrefix starts every key the admin API issues (SPEC 11).
const KeyPrefix = "sk-sy-"

// keyRandomChars is how many random base62 characters follow KeyPrefix:
// 43 of them carry 256 bits, as many as the SHA-256 that stores them.
const keyRandomChars = 43

// shownChars is how many random characters of an issued key its Prefix
// keeps: enough to tell keys apart in a list, too few to matter as a secret.
const shownChars = 6

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// HashKey is how a presented key is stored and compared (SPEC 3).
func HashKey(key string) [32]byte { return sha256.Sum256([]byte(key)) }

// ParseKey returns the digest of a key as the config gives it: a clear key,
// or "sha256:" and 64 hex digits in any case (the same key either way,
// SPEC 15). It is config.KeyDigest, the one key-identity rule, with ok
// false for an empty or malformed entry.
func ParseKey(k string) (digest [32]byte, ok bool) {
	d, err := config.KeyDigest(k)
	return d, err == nil
}

// Digest is a key's SHA-256, the only form in which a key is stored (SPEC
// 15). It reads and writes as 64 hex digits (written in lower case, read in
// either), and is 32 bytes in memory, not a 64-byte string: a catalog may
// hold 100,000 keys (SPEC 16).
type Digest [32]byte

// String is the lower-case hex form.
func (d Digest) String() string { return hex.EncodeToString(d[:]) }

// MarshalText implements encoding.TextMarshaler.
func (d Digest) MarshalText() ([]byte, error) {
	b := make([]byte, hex.EncodedLen(len(d)))
	hex.Encode(b, d[:])
	return b, nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Digest) UnmarshalText(b []byte) error {
	if len(b) != hex.EncodedLen(len(d)) {
		return fmt.Errorf("stored key digest is not 64 hex digits (got %d characters)", len(b))
	}
	if _, err := hex.Decode(d[:], b); err != nil {
		return fmt.Errorf("stored key digest is not 64 hex digits: %v", err)
	}
	return nil
}

// NewKey draws a fresh API key from rnd (crypto/rand.Reader in production):
// KeyPrefix and 43 base62 characters, with rejection sampling so every
// character is uniform. It returns the clear key (shown once) and the Key
// record that stores only its digest.
func NewKey(rnd io.Reader, name string, now time.Time, expires *time.Time) (clear string, k Key, err error) {
	var b strings.Builder
	b.WriteString(KeyPrefix)
	buf := make([]byte, 64)
	for b.Len() < len(KeyPrefix)+keyRandomChars {
		if _, err := io.ReadFull(rnd, buf); err != nil {
			return "", Key{}, fmt.Errorf("drawing a key: %w", err)
		}
		for _, c := range buf {
			if c >= 248 { // 248 = 4*62: keep the draw uniform
				continue
			}
			b.WriteByte(base62[c%62])
			if b.Len() == len(KeyPrefix)+keyRandomChars {
				break
			}
		}
	}
	clear = b.String()
	digest := Digest(HashKey(clear))
	var id [8]byte
	if _, err := io.ReadFull(rnd, id[:]); err != nil {
		return "", Key{}, fmt.Errorf("drawing a key id: %w", err)
	}
	k = Key{
		ID: "key_" + hex.EncodeToString(id[:]), Name: name, Digest: digest,
		Prefix: clear[:len(KeyPrefix)+shownChars], CreatedAt: now.UTC(), ExpiresAt: expires, Source: SourceAPI,
	}
	return clear, k, nil
}

// configKeys turns a team's config keys into Key records (digests only,
// one record per distinct key). Their ids derive from the digest, so every
// replica seeding the same file agrees on them. A key object's name,
// models and expiry come with it.
func configKeys(keys []config.KeySpec, now time.Time) []Key {
	out := make([]Key, 0, len(keys))
	seen := make(map[[32]byte]bool, len(keys))
	for i, ks := range keys {
		k, ok := configKey(i, ks, now)
		if !ok || seen[k.Digest] {
			continue
		}
		seen[k.Digest] = true
		out = append(out, k)
	}
	return out
}

// configKey is the catalog key of the i-th key of a team in the file;
// false when it does not parse.
func configKey(i int, ks config.KeySpec, now time.Time) (Key, bool) {
	d, ok := ParseKey(ks.Key)
	if !ok {
		return Key{}, false
	}
	h := hex.EncodeToString(d[:8])
	name := strings.Clone(ks.Name) // not a string of the parsed file: its pages go back at once
	if name == "" {
		name = configKeyName(i)
	}
	both := "cfg_" + h + "sha256:" + h[:8] // one allocation: the id and the prefix slice it
	k := Key{
		ID: both[:4+len(h)], Name: name, Digest: d, Prefix: both[4+len(h):], CreatedAt: now,
		ExpiresAt: ks.Expires(), Models: append([]string(nil), ks.Models...), Source: SourceConfig,
	}
	if l := limitsSpec(ks.Level()); l != nil {
		k.LimitsSpec = *l
	}
	return k, true
}

// sameConfigKey reports whether the file's key k leaves the stored key w
// as it is (its name, models, expiry and limits).
func sameConfigKey(k, w *Key) bool {
	return k.Name == w.Name && slices.Equal(k.Models, w.Models) && sameTime(k.ExpiresAt, w.ExpiresAt) &&
		k.LimitsSpec.Level() == w.LimitsSpec.Level()
}

// KeyView is a key as the admin API lists it: never a secret, not even the
// digest (SPEC 11), with its level of SPEC 3.1: the models it narrows its
// team's allowlist to (null: the team's) and its own limits (0 and null:
// none at the key level).
type KeyView struct {
	ID          string     `json:"id"`
	Name        string     `json:"name"`
	Prefix      string     `json:"prefix"`
	CreatedAt   time.Time  `json:"created_at"`
	ExpiresAt   *time.Time `json:"expires_at"`
	Source      string     `json:"source"`
	Models      []string   `json:"models"`
	RPM         int64      `json:"rpm"`
	TPM         int64      `json:"tpm"`
	MaxParallel int64      `json:"max_parallel"`
	Budget      *Budget    `json:"budget"`
}

// View returns the key's public fields.
func (k Key) View() KeyView {
	v := KeyView{ID: k.ID, Name: k.Name, Prefix: k.Prefix, CreatedAt: k.CreatedAt, ExpiresAt: k.ExpiresAt, Source: k.Source,
		RPM: k.RPM, TPM: k.TPM, MaxParallel: k.MaxParallel, Budget: k.Budget}
	if len(k.Models) > 0 {
		v.Models = k.Models
	}
	return v
}

// configKeyNames are the default names of a team's first config keys
// ("config key 1"...), one string each for every team.
var configKeyNames = func() (out [16]string) {
	for i := range out {
		out[i] = "config key " + strconv.Itoa(i+1)
	}
	return out
}()

// configKeyName is the default name of a team's i-th config key (from 0).
func configKeyName(i int) string {
	if i < len(configKeyNames) {
		return configKeyNames[i]
	}
	return "config key " + strconv.Itoa(i+1)
}
