//! A fast hash for the search's hot tables and for state fingerprints: every successor is hashed
//! once to be looked up, and SipHash over a byte-packed stream was a third of the search's time.
//!
//! [`Lanes`] absorbs each integer of a `Hash` stream as one 64-bit word into two lanes, each a
//! bijective multiply-rotate step with its own constants (two streams that differ in one word
//! always differ in both lanes), then finishes each lane with the SplitMix64 finaliser and the
//! stream's length. Derived `Hash` writes fixed-width integers (discriminants, fields, lengths of
//! slices), and a state's hand-packed one fixed-width words, so equal values give equal word
//! streams and distinct values of one type distinct ones.

use std::hash::{BuildHasherDefault, Hasher};

const MUL: [u64; 2] = [0x9e37_79b9_7f4a_7c15, 0xc2b2_ae3d_27d4_eb4f];
const ROT: [u32; 2] = [27, 31];

/// Two 64-bit lanes over one `Hash` stream; [`Lanes::wide`] is the 128-bit fingerprint,
/// `finish` one lane (for hash maps).
#[derive(Clone, Copy)]
pub(super) struct Lanes {
    a: u64,
    b: u64,
    words: u64,
}

impl Default for Lanes {
    fn default() -> Self {
        Self { a: 0x243f_6a88_85a3_08d3, b: 0x1319_8a2e_0370_7344, words: 0 }
    }
}

/// The SplitMix64 finaliser: every input bit reaches every output bit.
fn finalise(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Lanes {
    #[inline]
    fn word(&mut self, n: u64) {
        self.a = (self.a ^ n).wrapping_mul(MUL[0]).rotate_left(ROT[0]);
        self.b = (self.b ^ n).wrapping_mul(MUL[1]).rotate_left(ROT[1]);
        self.words += 1;
    }

    /// Both lanes, finished: the 128-bit fingerprint.
    pub(super) fn wide(&self) -> u128 {
        let a = finalise(self.a ^ self.words);
        let b = finalise(self.b.wrapping_add(self.words.rotate_left(32)));
        (u128::from(b) << 64) | u128::from(a)
    }
}

impl Hasher for Lanes {
    fn finish(&self) -> u64 {
        finalise(self.a ^ self.words)
    }
    fn write(&mut self, bytes: &[u8]) {
        self.word(bytes.len() as u64);
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.word(u64::from_le_bytes(word));
        }
    }
    #[inline]
    fn write_u8(&mut self, n: u8) {
        self.word(u64::from(n));
    }
    #[inline]
    fn write_u16(&mut self, n: u16) {
        self.word(u64::from(n));
    }
    #[inline]
    fn write_u32(&mut self, n: u32) {
        self.word(u64::from(n));
    }
    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.word(n);
    }
    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.word(n as u64);
    }
    #[inline]
    fn write_isize(&mut self, n: isize) {
        self.word(n as u64);
    }
}

/// Hash maps keyed by the model's small values (memo tables, rule caches).
pub(super) type FastMap<K, V> = std::collections::HashMap<K, V, BuildHasherDefault<Lanes>>;
