//! Deliberate bugs for the mutation tests (`tests/mutations.rs`): each fault breaks the forward
//! pass the way a real bug would, and the parity tests must catch it.
//!
//! A run-time switch, off unless a test calls [`set`]: every build carries the checks, so the
//! mutation tests run in the same test build as everything else (no second compile of the
//! runtime with a feature). A check is one relaxed atomic load at a few places per layer and
//! chunk, never inside a kernel's loop. Nothing but a test may call [`set`]: the module is
//! hidden from the docs and no binary or binding reaches it.

use std::sync::atomic::{AtomicU32, Ordering};

/// A deliberate bug.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Fault {
    /// Use the other RoPE pairing (half-rotation <-> interleaved).
    FlippedRopePairing = 1,
    /// Every query attends to every key of its chunk (the causal mask inverted into none).
    NonCausalMask = 2,
    /// Keys and values are written one cache slot past their position.
    CacheFrontierOffByOne = 4,
    /// Query heads read the wrong kv head (kv heads 0 and 1 swapped when written).
    WrongKvHeadMapping = 8,
}

static ACTIVE: AtomicU32 = AtomicU32::new(0);

/// Switch exactly `fault` on (or all faults off with `None`), process-wide.
pub fn set(fault: Option<Fault>) {
    ACTIVE.store(fault.map_or(0, |f| f as u32), Ordering::SeqCst);
}

#[inline(always)]
pub(crate) fn on(fault: Fault) -> bool {
    ACTIVE.load(Ordering::Relaxed) & fault as u32 != 0
}
