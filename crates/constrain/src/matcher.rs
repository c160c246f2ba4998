//! [`CompiledGrammar`] (a grammar against a vocabulary, with its mask cache) and [`Matcher`]
//! (one request's parse state).
//!
//! **Masks.** A state is a set of parse stacks; a token is allowed iff some stack accepts all of
//! its bytes. For each stack the top `CONTEXT_FRAMES` frames form a key. For a key the grammar
//! computes once (then caches) an [`Entry`] by walking the vocabulary trie from the truncated
//! stack: tokens consumed without popping below the known frames are *accepted* whatever lies
//! below; tokens that die within them are *rejected*; the rest (they pop below the known frames
//! with bytes left) are *uncertain*. A mask step is then: OR the accepted sets of the state's
//! keys, and run only the uncertain tokens against the real stacks (sorted, sharing prefixes).
//! This is XGrammar's split into context-independent and context-dependent tokens, keyed by the
//! top frames rather than by one position. A token only becomes uncertain when its next byte can
//! follow the bottom known frame's rule somewhere in the grammar (FOLLOW sets); otherwise it is
//! rejected outright, which keeps the uncertain lists short (a number's digits would otherwise
//! make every token uncertain).
//!
//! The cache is exact, not a heuristic: a cached mask equals the plain trie walk's mask bit for
//! bit (`tests/masks.rs` checks both against feeding every token's bytes to a copy of the
//! matcher).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

use crate::error::{Error, Result};
use crate::grammar::Grammar;
use crate::program::{CanEnd, Node, Program, BOTTOM, ROOT};
use crate::vocab::TokenVocabulary;

/// How many top frames of a stack key a cached entry.
const CONTEXT_FRAMES: usize = 4;
type Key = [u32; CONTEXT_FRAMES + 1];
/// Cache memory bound: past it, entries are computed per use and not kept.
const MAX_CACHE_BYTES: usize = 512 << 20;
/// A state with more parse stacks than this is refused (an ambiguity explosion).
const MAX_STACKS: usize = 10_000;
/// Arena size below which a matcher never compacts.
const MIN_COMPACT: usize = 4096;

#[derive(Debug)]
enum Accepted {
    Sparse(Vec<u32>),
    Dense(Vec<u64>),
}

#[derive(Debug)]
struct Entry {
    accepted: Accepted,
    /// Tokens to check against the full stack, in byte order, with each one's common prefix
    /// length with the previous.
    uncertain: Vec<(u32, u32)>,
}

impl Entry {
    fn bytes(&self) -> usize {
        let a = match &self.accepted {
            Accepted::Sparse(v) => v.len() * 4,
            Accepted::Dense(v) => v.len() * 8,
        };
        a + self.uncertain.len() * 8 + 64
    }
}

/// Counters of a compiled grammar's mask cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Entries held.
    pub entries: usize,
    /// Approximate bytes held.
    pub bytes: usize,
    /// Lookups that found an entry.
    pub hits: u64,
    /// Lookups that computed one.
    pub misses: u64,
}

/// A grammar compiled against a vocabulary. Compile once per (grammar, vocabulary) and share it
/// (`Arc`) between requests: it is `Send + Sync`, and the mask cache it fills is shared.
pub struct CompiledGrammar {
    program: Program,
    vocab: Arc<TokenVocabulary>,
    cache: RwLock<HashMap<Key, Arc<Entry>>>,
    cache_bytes: AtomicUsize,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl std::fmt::Debug for CompiledGrammar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledGrammar")
            .field("vocabulary", &self.vocab.len())
            .field("cache", &self.cache_stats())
            .finish_non_exhaustive()
    }
}

/// Per-walk scratch: a stack of levels (states after each prefix length).
#[derive(Default)]
struct Levels {
    tops: Vec<u32>,
    start: Vec<usize>,
    arena_len: Vec<usize>,
    /// Whether some path popped below the known frames to take this or an earlier byte.
    uncertain: Vec<bool>,
}

impl Levels {
    fn reset(&mut self, arena_len: usize, tops: &[u32]) {
        self.tops.clear();
        self.tops.extend_from_slice(tops);
        self.start.clear();
        self.start.push(0);
        self.arena_len.clear();
        self.arena_len.push(arena_len);
        self.uncertain.clear();
        self.uncertain.push(false);
    }

    fn len(&self) -> usize {
        self.start.len()
    }

    fn truncate(&mut self, n: usize, arena: &mut Vec<Node>) {
        if n < self.start.len() {
            self.tops.truncate(self.start[n]);
            arena.truncate(self.arena_len[n]);
            self.start.truncate(n);
            self.arena_len.truncate(n);
            self.uncertain.truncate(n);
        }
    }

    /// Pushes the last level advanced by `byte`.
    fn push(&mut self, program: &Program, arena: &mut Vec<Node>, byte: u8) {
        let last = self.start.len() - 1;
        let from = self.start[last]..self.tops.len();
        let before = self.uncertain[last];
        self.start.push(self.tops.len());
        self.arena_len.push(arena.len());
        let flags = program.advance(arena, &mut self.tops, from, byte);
        self.uncertain.push(before || flags.ctx);
    }

    fn last_has_stacks(&self) -> bool {
        self.tops.len() > *self.start.last().expect("a level")
    }

    fn last_uncertain(&self) -> bool {
        *self.uncertain.last().expect("a level")
    }
}

#[inline]
fn set_bit(mask: &mut [u64], id: u32) {
    mask[(id >> 6) as usize] |= 1 << (id & 63);
}

#[inline]
fn get_bit(mask: &[u64], id: u32) -> bool {
    (mask[(id >> 6) as usize] >> (id & 63)) & 1 != 0
}

impl CompiledGrammar {
    /// Compiles `grammar` against `vocab`: lowers it to bytes, refuses left recursion and
    /// grammars that match nothing, and precomputes every position's expansion.
    pub fn new(grammar: &Grammar, vocab: Arc<TokenVocabulary>) -> Result<Self> {
        Ok(CompiledGrammar {
            program: Program::compile(grammar)?,
            vocab,
            cache: RwLock::new(HashMap::new()),
            cache_bytes: AtomicUsize::new(0),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        })
    }

    /// The vocabulary compiled against.
    pub fn vocabulary(&self) -> &Arc<TokenVocabulary> {
        &self.vocab
    }

    /// The mask cache's counters.
    pub fn cache_stats(&self) -> CacheStats {
        let entries = self.cache.read().map_or(0, |c| c.len());
        CacheStats {
            entries,
            bytes: self.cache_bytes.load(Ordering::Relaxed),
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
        }
    }

    /// Empties the mask cache (benchmarks measure the uncached path with it).
    pub fn clear_cache(&self) {
        if let Ok(mut c) = self.cache.write() {
            c.clear();
        }
        self.cache_bytes.store(0, Ordering::Relaxed);
    }

    fn entry(&self, key: &Key) -> Arc<Entry> {
        if let Some(e) = self.cache.read().ok().and_then(|c| c.get(key).cloned()) {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return e;
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        let e = Arc::new(self.compute_entry(key));
        let size = e.bytes();
        if self.cache_bytes.load(Ordering::Relaxed) + size <= MAX_CACHE_BYTES {
            if let Ok(mut c) = self.cache.write() {
                if c.insert(*key, e.clone()).is_none() {
                    self.cache_bytes.fetch_add(size, Ordering::Relaxed);
                }
            }
        }
        e
    }

    /// Walks the trie from the truncated stack `key`.
    fn compute_entry(&self, key: &Key) -> Entry {
        let mut arena: Vec<Node> = Vec::new();
        let frames = key[..CONTEXT_FRAMES]
            .iter()
            .take_while(|&&p| p < BOTTOM)
            .count();
        let mut parent = key[frames];
        for &pos in key[..frames].iter().rev() {
            arena.push(Node { pos, parent });
            parent = (arena.len() - 1) as u32;
        }
        let mut levels = Levels::default();
        levels.reset(arena.len(), &[parent]);
        let trie = &self.vocab.trie;
        let mut accepted = vec![0u64; self.vocab.mask_words()];
        let mut n_accepted = 0usize;
        let mut uncertain: Vec<u32> = Vec::new();
        let mut i = 0usize;
        while i < trie.byte.len() {
            let d = trie.depth[i] as usize;
            levels.truncate(d, &mut arena);
            levels.push(&self.program, &mut arena, trie.byte[i]);
            let stacks = levels.last_has_stacks();
            let unsure = levels.last_uncertain();
            let toks = &trie.tokens[trie.tok_start[i] as usize..trie.tok_start[i + 1] as usize];
            if stacks {
                for &t in toks {
                    set_bit(&mut accepted, t);
                }
                n_accepted += toks.len();
            } else if unsure {
                uncertain.extend_from_slice(toks);
            }
            if stacks || unsure {
                i += 1;
            } else {
                i = trie.end[i] as usize;
            }
        }
        let accepted = if n_accepted * 2 * 32 < self.vocab.len() {
            let mut v = Vec::with_capacity(n_accepted);
            for (w, &bits) in accepted.iter().enumerate() {
                let mut b = bits;
                while b != 0 {
                    v.push((w * 64) as u32 + b.trailing_zeros());
                    b &= b - 1;
                }
            }
            Accepted::Sparse(v)
        } else {
            Accepted::Dense(accepted)
        };
        let mut with_lcp = Vec::with_capacity(uncertain.len());
        let mut prev: &[u8] = &[];
        for &t in &uncertain {
            let b = self.vocab.token_bytes(t).unwrap_or(&[]);
            let lcp = prev.iter().zip(b).take_while(|(x, y)| x == y).count();
            with_lcp.push((t, lcp as u32));
            prev = b;
        }
        Entry {
            accepted,
            uncertain: with_lcp,
        }
    }
}

/// One sequence's parse state against a [`CompiledGrammar`].
///
/// Per step: [`Matcher::fill_mask`] gives the allowed tokens, the sampler picks among them, and
/// [`Matcher::accept_token`] advances. EOS is allowed exactly when [`Matcher::is_accepting`];
/// when the grammar cannot continue at all, EOS is the only allowed token.
#[derive(Clone)]
pub struct Matcher {
    grammar: Arc<CompiledGrammar>,
    arena: Vec<Node>,
    tops: Vec<u32>,
    accepting: bool,
    terminated: bool,
    /// States before each of the last accepted tokens, for `rollback`.
    history: std::collections::VecDeque<(Vec<u32>, bool)>,
    max_rollback: usize,
    compact_at: usize,
    levels_scratch: Option<Box<LevelsBox>>,
}

/// `Levels` is not `Clone`-friendly to share; each clone starts with fresh scratch.
#[derive(Default)]
struct LevelsBox(Levels);

impl Clone for LevelsBox {
    fn clone(&self) -> Self {
        LevelsBox::default()
    }
}

impl std::fmt::Debug for Matcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Matcher")
            .field("stacks", &self.tops.len())
            .field("accepting", &self.accepting)
            .field("terminated", &self.terminated)
            .finish_non_exhaustive()
    }
}

impl Matcher {
    /// A matcher at the start of the grammar. Keeps the last 16 tokens for [`Matcher::rollback`].
    pub fn new(grammar: Arc<CompiledGrammar>) -> Self {
        let mut arena = Vec::new();
        let mut tops = Vec::new();
        grammar.program.initial(&mut arena, &mut tops);
        let accepting = tops
            .iter()
            .any(|&t| grammar.program.can_end(&arena, t) == CanEnd::Root);
        Matcher {
            grammar,
            arena,
            tops,
            accepting,
            terminated: false,
            history: Default::default(),
            max_rollback: 16,
            compact_at: MIN_COMPACT,
            levels_scratch: Some(Box::default()),
        }
    }

    /// Sets how many tokens [`Matcher::rollback`] can undo (0 keeps no history).
    pub fn set_max_rollback(&mut self, n: usize) {
        self.max_rollback = n;
        while self.history.len() > n {
            self.history.pop_front();
        }
    }

    /// The compiled grammar.
    pub fn grammar(&self) -> &Arc<CompiledGrammar> {
        &self.grammar
    }

    /// Whether the grammar can end here (EOS is allowed).
    pub fn is_accepting(&self) -> bool {
        self.accepting && !self.terminated
    }

    /// Whether some token other than EOS can follow.
    pub fn can_continue(&self) -> bool {
        !self.terminated
            && self
                .tops
                .iter()
                .any(|&t| self.grammar.program.can_continue(&self.arena, t))
    }

    /// Whether EOS has been accepted.
    pub fn is_terminated(&self) -> bool {
        self.terminated
    }

    /// Writes the allowed tokens as a bitmask (`vocabulary().mask_words()` words; bit `id % 64`
    /// of word `id / 64`). After termination only EOS is set.
    pub fn fill_mask(&mut self, mask: &mut [u64]) {
        let vocab = self.grammar.vocab.clone();
        assert_eq!(mask.len(), vocab.mask_words(), "mask length");
        mask.fill(0);
        if !self.terminated {
            let mut scratch = self.levels_scratch.take().unwrap_or_default();
            for k in 0..self.tops.len() {
                let top = self.tops[k];
                let key = self.key_of(top);
                let entry = self.grammar.entry(&key);
                match &entry.accepted {
                    Accepted::Dense(bits) => {
                        for (m, b) in mask.iter_mut().zip(bits) {
                            *m |= b;
                        }
                    }
                    Accepted::Sparse(ids) => {
                        for &t in ids {
                            set_bit(mask, t);
                        }
                    }
                }
                if !entry.uncertain.is_empty() {
                    self.check_uncertain(top, &entry.uncertain, mask, &mut scratch.0);
                }
            }
            self.levels_scratch = Some(scratch);
        }
        if self.accepting || self.terminated {
            for &e in vocab.eos_ids() {
                set_bit(mask, e);
            }
        }
    }

    /// The allowed token ids (a convenience over [`Matcher::fill_mask`]).
    pub fn allowed_tokens(&mut self) -> Vec<u32> {
        let mut mask = vec![0u64; self.grammar.vocab.mask_words()];
        self.fill_mask(&mut mask);
        (0..self.grammar.vocab.len() as u32)
            .filter(|&t| get_bit(&mask, t))
            .collect()
    }

    /// The mask by a plain trie walk from the whole state, without the cache (the reference the
    /// cached path is tested against, and the benchmark's baseline).
    pub fn fill_mask_uncached(&mut self, mask: &mut [u64]) {
        let vocab = self.grammar.vocab.clone();
        assert_eq!(mask.len(), vocab.mask_words(), "mask length");
        mask.fill(0);
        if !self.terminated {
            let base = self.arena.len();
            let mut levels = Levels::default();
            levels.reset(base, &self.tops);
            let trie = &vocab.trie;
            let mut i = 0usize;
            while i < trie.byte.len() {
                let d = trie.depth[i] as usize;
                levels.truncate(d, &mut self.arena);
                levels.push(&self.grammar.program, &mut self.arena, trie.byte[i]);
                let stacks = levels.last_has_stacks();
                if stacks {
                    for &t in
                        &trie.tokens[trie.tok_start[i] as usize..trie.tok_start[i + 1] as usize]
                    {
                        set_bit(mask, t);
                    }
                }
                i = if stacks { i + 1 } else { trie.end[i] as usize };
            }
            self.arena.truncate(base);
        }
        if self.accepting || self.terminated {
            for &e in vocab.eos_ids() {
                set_bit(mask, e);
            }
        }
    }

    /// Sets every disallowed token's logit to minus infinity.
    pub fn apply_mask(mask: &[u64], logits: &mut [f32]) {
        for (w, chunk) in logits.chunks_mut(64).enumerate() {
            let bits = mask.get(w).copied().unwrap_or(0);
            if bits == u64::MAX {
                continue;
            }
            if bits == 0 {
                chunk.fill(f32::NEG_INFINITY);
                continue;
            }
            for (i, l) in chunk.iter_mut().enumerate() {
                if (bits >> i) & 1 == 0 {
                    *l = f32::NEG_INFINITY;
                }
            }
        }
    }

    fn key_of(&self, top: u32) -> Key {
        let mut key = [ROOT; CONTEXT_FRAMES + 1];
        let mut n = top;
        for slot in key.iter_mut().take(CONTEXT_FRAMES) {
            if n >= BOTTOM {
                break;
            }
            let x = self.arena[n as usize];
            *slot = x.pos;
            n = x.parent;
        }
        let frames = key.iter().take_while(|&&p| p < BOTTOM).count();
        key[frames] = if n == ROOT { ROOT } else { BOTTOM };
        key
    }

    /// Sets the uncertain tokens the full stack `top` accepts.
    fn check_uncertain(
        &mut self,
        top: u32,
        uncertain: &[(u32, u32)],
        mask: &mut [u64],
        levels: &mut Levels,
    ) {
        let vocab = self.grammar.vocab.clone();
        let program = &self.grammar.program;
        let base = self.arena.len();
        levels.reset(base, &[top]);
        // Levels valid for the current token's prefix.
        let mut valid = 1usize;
        for &(t, lcp) in uncertain {
            valid = valid.min(lcp as usize + 1);
            if get_bit(mask, t) {
                continue;
            }
            let bytes = vocab.token_bytes(t).unwrap_or(&[]);
            levels.truncate(valid, &mut self.arena);
            let mut alive = levels.len() == 1 || levels.last_has_stacks();
            while alive && levels.len() <= bytes.len() {
                let b = bytes[levels.len() - 1];
                levels.push(program, &mut self.arena, b);
                alive = levels.last_has_stacks();
            }
            valid = levels.len();
            if levels.len() == bytes.len() + 1 && alive {
                set_bit(mask, t);
            }
        }
        levels.truncate(1, &mut self.arena);
        self.arena.truncate(base);
    }

    /// Advances by token `id`. EOS is accepted only when [`Matcher::is_accepting`] and ends the
    /// matcher. A disallowed token is an error and leaves the state unchanged.
    pub fn accept_token(&mut self, id: u32) -> Result<()> {
        if self.terminated {
            return Err(Error::TokenRejected {
                id,
                reason: "the matcher has already accepted EOS".into(),
            });
        }
        let vocab = self.grammar.vocab.clone();
        if vocab.is_eos(id) {
            if !self.accepting {
                return Err(Error::TokenRejected {
                    id,
                    reason: "EOS before the grammar can end".into(),
                });
            }
            self.push_history();
            self.terminated = true;
            return Ok(());
        }
        let Some(bytes) = vocab.token_bytes(id) else {
            return Err(Error::TokenRejected {
                id,
                reason: if (id as usize) < vocab.len() {
                    "the token has no bytes (special token)".into()
                } else {
                    format!("out of range: the vocabulary has {} tokens", vocab.len())
                },
            });
        };
        self.advance(bytes)
            .map_err(|reason| Error::TokenRejected { id, reason })
    }

    /// Advances by raw bytes (e.g. forced text). Empty input is refused; a disallowed byte is an
    /// error and leaves the state unchanged.
    pub fn accept_bytes(&mut self, bytes: &[u8]) -> Result<()> {
        if self.terminated {
            return Err(Error::TokenRejected {
                id: u32::MAX,
                reason: "the matcher has already accepted EOS".into(),
            });
        }
        self.advance(bytes).map_err(|reason| Error::TokenRejected {
            id: u32::MAX,
            reason,
        })
    }

    fn advance(&mut self, bytes: &[u8]) -> std::result::Result<(), String> {
        if bytes.is_empty() {
            return Err("empty token".into());
        }
        let base = self.arena.len();
        let mut cur = self.tops.clone();
        for (i, &b) in bytes.iter().enumerate() {
            let mut next = cur;
            let n = next.len();
            self.grammar
                .program
                .advance(&mut self.arena, &mut next, 0..n, b);
            next.drain(..n);
            if next.len() > MAX_STACKS {
                self.arena.truncate(base);
                return Err(format!(
                    "the grammar is too ambiguous: {} parse stacks after byte {i}",
                    next.len()
                ));
            }
            if next.is_empty() {
                self.arena.truncate(base);
                let shown = String::from_utf8_lossy(bytes);
                return Err(format!(
                    "the grammar does not allow byte {i} (0x{b:02X}) of {shown:?} here"
                ));
            }
            cur = next;
        }
        self.push_history();
        self.accepting = cur
            .iter()
            .any(|&t| self.grammar.program.can_end(&self.arena, t) == CanEnd::Root);
        self.tops = cur;
        if self.arena.len() > self.compact_at {
            self.compact();
        }
        Ok(())
    }

    fn push_history(&mut self) {
        if self.max_rollback == 0 {
            return;
        }
        if self.history.len() == self.max_rollback {
            self.history.pop_front();
        }
        self.history.push_back((self.tops.clone(), self.accepting));
    }

    /// Undoes the last `n` accepted tokens (EOS included). Errors when fewer are remembered.
    pub fn rollback(&mut self, n: usize) -> Result<()> {
        if n > self.history.len() {
            return Err(Error::TokenRejected {
                id: u32::MAX,
                reason: format!(
                    "cannot roll back {n} tokens: {} are remembered",
                    self.history.len()
                ),
            });
        }
        for _ in 0..n {
            let (tops, accepting) = self.history.pop_back().expect("checked length");
            self.tops = tops;
            self.accepting = accepting;
            self.terminated = false;
        }
        Ok(())
    }

    /// Back to the start of the grammar.
    pub fn reset(&mut self) {
        *self = Matcher::new(self.grammar.clone());
    }

    /// Drops arena nodes no live stack (current or remembered) reaches.
    fn compact(&mut self) {
        let n = self.arena.len();
        let mut live = vec![false; n];
        let roots = self
            .tops
            .iter()
            .chain(self.history.iter().flat_map(|(t, _)| t.iter()));
        for &r in roots {
            let mut x = r;
            while x < BOTTOM && !live[x as usize] {
                live[x as usize] = true;
                x = self.arena[x as usize].parent;
            }
        }
        let mut map = vec![u32::MAX; n];
        let mut out = Vec::with_capacity(live.iter().filter(|&&l| l).count());
        for i in 0..n {
            if live[i] {
                let mut node = self.arena[i];
                if node.parent < BOTTOM {
                    node.parent = map[node.parent as usize];
                }
                map[i] = out.len() as u32;
                out.push(node);
            }
        }
        self.arena = out;
        for t in self.tops.iter_mut() {
            *t = map[*t as usize];
        }
        for (tops, _) in self.history.iter_mut() {
            for t in tops.iter_mut() {
                *t = map[*t as usize];
            }
        }
        self.compact_at = (self.arena.len() * 2).max(MIN_COMPACT);
    }
}
