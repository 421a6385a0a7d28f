package trailer

import (
	"bytes"
	"crypto/sha256"
	"testing"
)

func TestSHA256WhateverTheWrites(t *testing.T) {
	content := bytes.Repeat([]byte("etcd snapshot "), 20)
	sum := sha256.Sum256(content)
	stream := append(append([]byte(nil), content...), sum[:]...)
	// Every split into two writes, and one byte at a time: the trailer lands across them.
	for cut := 0; cut <= len(stream); cut++ {
		h := New()
		h.Write(stream[:cut])
		h.Write(stream[cut:])
		if !h.Intact() || !bytes.Equal(h.Sum(), sum[:]) || !bytes.Equal(h.Trailer(), sum[:]) {
			t.Fatalf("split at %d: intact %t, sum %x, trailer %x; want the content's %x", cut, h.Intact(), h.Sum(), h.Trailer(), sum)
		}
	}
	h := New()
	for i := range stream {
		h.Write(stream[i : i+1])
	}
	if !h.Intact() {
		t.Error("byte by byte: not intact")
	}

	damaged := bytes.Clone(stream)
	damaged[3] ^= 1
	if h := New(); func() bool { h.Write(damaged); return h.Intact() }() {
		t.Error("a changed byte of the content: still intact")
	}
	if h := New(); func() bool { h.Write(stream[:len(stream)-1]); return h.Intact() }() {
		t.Error("a stream cut one byte short: still intact")
	}
	if h := New(); func() bool { h.Write(sum[:20]); return h.Intact() || len(h.Trailer()) != 20 }() {
		t.Error("a stream shorter than a SHA-256: intact, or its trailer is not all it holds")
	}
}
