package cluster

import "strings"

// Key layout (CONVENTIONS 13): every key starts with redis.key_prefix and
// carries one hash tag per owner, so a Lua script touching several keys of
// one team (or one deployment) stays in one Redis Cluster slot:
//
//	<prefix>{team:<name>}:<name>   e.g. switchyard:{team:acme}:tat
//	<prefix>{dep:<id>}:<name>      e.g. switchyard:{dep:mini-openai}:usage
//
// A prefix that itself contains a '{...}' tag would put every key in one slot;
// that still works (one slot is trivially "the same slot"), it only stops
// Cluster from spreading teams over nodes.

// TeamKey names a key of team: prefix + "{team:" + team + "}:" + name.
func TeamKey(prefix, team, name string) string {
	return prefix + "{team:" + team + "}:" + name
}

// DeploymentKey names a key of deployment id: prefix + "{dep:" + id + "}:" + name.
func DeploymentKey(prefix, id, name string) string {
	return prefix + "{dep:" + id + "}:" + name
}

// Slot is the Redis Cluster hash slot of key (CRC16/XMODEM of the hash tag,
// or of the whole key when it has none, modulo 16384), as computed by
// Redis's keyHashSlot. go-redis does not export its own; tests use this to
// check the hash-tag rule against real slot arithmetic, since miniredis
// never rejects a cross-slot script.
func Slot(key string) int {
	if s := strings.IndexByte(key, '{'); s >= 0 {
		if e := strings.IndexByte(key[s+1:], '}'); e > 0 { // an empty tag "{}" hashes the whole key
			key = key[s+1 : s+1+e]
		}
	}
	return int(crc16(key) & 16383)
}

// crc16 is CRC-16/XMODEM (poly 0x1021, init 0), the variant Redis Cluster uses.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for b := 0; b < 8; b++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
