//! The grammar lowered to bytes, and the pushdown recogniser that runs it.
//!
//! Lowering turns every character set into byte-level terminals (ASCII sets become one byte set;
//! other sets become the UTF-8 byte sequences of their ranges, inlined when there is one, else a
//! helper rule of alternatives), drops alternatives that can never complete, and lays every
//! alternative out in one flat array of positions ending in `End`.
//!
//! A parse stack is a chain of [`Node`]s (`pos`, `parent`) in an arena; every frame, the top
//! included, is a continuation position (where to resume). For every position the *closure* is
//! precomputed: the frame sequences to push (each ending in a terminal) and whether the position
//! can complete without consuming input. Stacks are expanded lazily, when the next byte is known:
//! advancing a stack by a byte pushes only the closure items whose terminal takes that byte
//! (their last frame becomes the terminal's successor), and when the top's closure can complete
//! it pops into the parent frame and does the same there. So a character class with many UTF-8
//! alternatives costs one stack, not one per alternative. Rule references in tail position are
//! not kept as frames (tail calls), so right recursion (`x*`) keeps the stack flat. Left
//! recursion makes a closure infinite and is refused.

use std::collections::{HashMap, HashSet};

use regex_syntax::utf8::Utf8Sequences;

use crate::error::{grammar_error, Result};
use crate::grammar::{CharSet, Element, Grammar};

/// Parent of the bottom frame of a complete stack: popping into it completes `root`.
pub(crate) const ROOT: u32 = u32::MAX;
/// Parent of the bottom frame of a truncated stack: popping into it needs the frames below.
pub(crate) const BOTTOM: u32 = u32::MAX - 1;

/// Limits on what compiling a grammar may build.
const MAX_CLOSURE_DEPTH: usize = 1000;
const MAX_CLOSURE_POOL: usize = 8 << 20;
/// Above this many stacks in one state, duplicates are removed by comparing whole stacks.
const DEEP_DEDUP_THRESHOLD: usize = 16;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Node {
    pub pos: u32,
    pub parent: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PElem {
    Term,
    Ref(u32),
    End,
}

/// What one byte step produced besides the new stacks.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct StepFlags {
    /// Some truncated stack popped below its known frames to take this byte.
    pub ctx: bool,
}

/// Whether a stack can end with no more input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CanEnd {
    No,
    /// It completes `root`.
    Root,
    /// It pops below the known frames of a truncated stack.
    Context,
}

#[derive(Clone, Copy, Debug, Default)]
struct Closure {
    items_start: u32,
    items_end: u32,
    returns: bool,
    /// The union of the items' terminal byte sets.
    first: [u64; 4],
    /// For closures with many items: where in `byte_table` their per-byte item lists start
    /// (`NO_TABLE` otherwise).
    table: u32,
}

const NO_TABLE: u32 = u32::MAX;
/// Closures with more items than this get a per-byte index of their items.
const INDEX_ITEMS: usize = 4;

#[derive(Debug)]
pub(crate) struct Program {
    /// Per position: the 256-bit byte set (terminals only).
    sets: Vec<[u64; 4]>,
    closures: Vec<Closure>,
    /// Per position: the rule whose alternative holds it.
    rule_of: Vec<u32>,
    /// Per rule: the bytes that can follow it in some context (FOLLOW sets, at the byte level).
    follow: Vec<[u64; 4]>,
    /// Per indexed closure, 257 offsets into `byte_items`: the items whose terminal takes byte
    /// `b` are `byte_items[table[b]..table[b + 1]]`.
    byte_table: Vec<u32>,
    byte_items: Vec<u32>,
    /// `(start, end)` ranges of `pool`, each one push sequence.
    items: Vec<(u32, u32)>,
    pool: Vec<u32>,
    /// The position of the synthetic `Ref(root) End`.
    pub start: u32,
}

enum BElem {
    Term([u64; 4]),
    Ref(u32),
}

fn ascii_set(set: &CharSet) -> [u64; 4] {
    let mut bits = [0u64; 4];
    for &(a, b) in set.ranges() {
        if a > 0x7F {
            break;
        }
        for c in a..=b.min(0x7F) {
            bits[(c >> 6) as usize] |= 1 << (c & 63);
        }
    }
    bits
}

fn range_set(lo: u8, hi: u8) -> [u64; 4] {
    let mut bits = [0u64; 4];
    for c in lo..=hi {
        bits[(c >> 6) as usize] |= 1 << (c & 63);
    }
    bits
}

impl Program {
    pub(crate) fn compile(g: &Grammar) -> Result<Program> {
        // Lower characters to bytes.
        let mut names: Vec<String> = g.rules().iter().map(|r| r.name.clone()).collect();
        let mut rules: Vec<Vec<Vec<BElem>>> = Vec::with_capacity(g.rules().len());
        let mut class_rules: HashMap<CharSet, u32> = HashMap::new();
        let mut extra: Vec<Vec<Vec<BElem>>> = Vec::new();
        for rule in g.rules() {
            let mut alts = Vec::with_capacity(rule.alternatives.len());
            for alt in &rule.alternatives {
                let mut seq = Vec::with_capacity(alt.len());
                for e in alt {
                    match e {
                        Element::Rule(r) => seq.push(BElem::Ref(*r as u32)),
                        Element::Chars(set) => {
                            let ascii = ascii_set(set);
                            let mut seqs: Vec<Vec<[u64; 4]>> = Vec::new();
                            for &(a, b) in set.ranges() {
                                if b < 0x80 {
                                    continue;
                                }
                                let (Some(a), Some(b)) =
                                    (char::from_u32(a.max(0x80)), char::from_u32(b))
                                else {
                                    continue;
                                };
                                for s in Utf8Sequences::new(a, b) {
                                    seqs.push(
                                        s.as_slice()
                                            .iter()
                                            .map(|r| range_set(r.start, r.end))
                                            .collect(),
                                    );
                                }
                            }
                            if seqs.is_empty() {
                                seq.push(BElem::Term(ascii));
                            } else if ascii == [0; 4] && seqs.len() == 1 {
                                seq.extend(seqs.pop().expect("one").into_iter().map(BElem::Term));
                            } else {
                                let next = (g.rules().len() + extra.len()) as u32;
                                let id = *class_rules.entry(set.clone()).or_insert_with(|| {
                                    let mut calts: Vec<Vec<BElem>> = Vec::new();
                                    if ascii != [0; 4] {
                                        calts.push(vec![BElem::Term(ascii)]);
                                    }
                                    for s in seqs {
                                        calts.push(s.into_iter().map(BElem::Term).collect());
                                    }
                                    extra.push(calts);
                                    names.push(format!("{}-chars", rule.name));
                                    next
                                });
                                seq.push(BElem::Ref(id));
                            }
                        }
                    }
                }
                alts.push(seq);
            }
            rules.push(alts);
        }
        rules.extend(extra);

        // Keep only alternatives that can complete.
        let mut productive = vec![false; rules.len()];
        loop {
            let mut changed = false;
            for (r, alts) in rules.iter().enumerate() {
                if productive[r] {
                    continue;
                }
                let ok = alts.iter().any(|alt| {
                    alt.iter().all(|e| match e {
                        BElem::Term(s) => *s != [0; 4],
                        BElem::Ref(x) => productive[*x as usize],
                    })
                });
                if ok {
                    productive[r] = true;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        let root = g.root();
        if !productive[root] {
            return Err(grammar_error(format!(
                "rule '{}' can never complete: the grammar matches nothing",
                names[root]
            )));
        }

        // Lay out the positions.
        let mut elems = Vec::new();
        let mut sets = Vec::new();
        let mut rule_of = Vec::new();
        let mut rule_alts: Vec<Vec<u32>> = vec![Vec::new(); rules.len()];
        for (r, alts) in rules.iter().enumerate() {
            for alt in alts {
                let ok = alt.iter().all(|e| match e {
                    BElem::Term(s) => *s != [0; 4],
                    BElem::Ref(x) => productive[*x as usize],
                });
                if !ok {
                    continue;
                }
                rule_alts[r].push(elems.len() as u32);
                for e in alt {
                    match e {
                        BElem::Term(s) => {
                            elems.push(PElem::Term);
                            sets.push(*s);
                        }
                        BElem::Ref(x) => {
                            elems.push(PElem::Ref(*x));
                            sets.push([0; 4]);
                        }
                    }
                    rule_of.push(r as u32);
                }
                elems.push(PElem::End);
                sets.push([0; 4]);
                rule_of.push(r as u32);
            }
        }
        if elems.len() >= (BOTTOM - 2) as usize {
            return Err(grammar_error("grammar too large to compile"));
        }
        let start = elems.len() as u32;
        elems.push(PElem::Ref(root as u32));
        elems.push(PElem::End);
        sets.extend([[0; 4]; 2]);
        rule_of.extend([root as u32; 2]);

        let mut c = ClosureBuilder {
            elems: &elems,
            rule_alts: &rule_alts,
            rule_of: &rule_of,
            names: &names,
            state: vec![0; elems.len()],
            done: vec![(Vec::new(), false); elems.len()],
            pool_size: 0,
        };
        for p in 0..elems.len() {
            c.closure(p as u32, 0)?;
        }
        let mut closures = Vec::with_capacity(elems.len());
        let mut items = Vec::new();
        let mut pool = Vec::new();
        for (seqs, returns) in c.done {
            let items_start = items.len() as u32;
            let mut first = [0u64; 4];
            for s in seqs {
                let st = pool.len() as u32;
                let term = *s.last().expect("an item ends in a terminal");
                for (f, t) in first.iter_mut().zip(&sets[term as usize]) {
                    *f |= t;
                }
                pool.extend_from_slice(&s);
                items.push((st, pool.len() as u32));
            }
            closures.push(Closure {
                items_start,
                items_end: items.len() as u32,
                returns,
                first,
                table: NO_TABLE,
            });
        }
        let mut byte_table = Vec::new();
        let mut byte_items = Vec::new();
        for c in closures.iter_mut() {
            let range = c.items_start as usize..c.items_end as usize;
            if range.len() <= INDEX_ITEMS {
                continue;
            }
            c.table = byte_table.len() as u32;
            for b in 0..=255u8 {
                byte_table.push(byte_items.len() as u32);
                for i in range.clone() {
                    let term = pool[items[i].1 as usize - 1] as usize;
                    if (sets[term][(b >> 6) as usize] >> (b & 63)) & 1 != 0 {
                        byte_items.push(i as u32);
                    }
                }
            }
            byte_table.push(byte_items.len() as u32);
        }
        let follow = follow_sets(&elems, &sets, &rule_alts);
        Ok(Program {
            sets,
            closures,
            byte_table,
            byte_items,
            rule_of,
            follow,
            items,
            pool,
            start,
        })
    }

    /// Whether terminal position `pos` accepts `byte`.
    #[inline]
    fn term_has(&self, pos: u32, byte: u8) -> bool {
        let s = &self.sets[pos as usize];
        (s[(byte >> 6) as usize] >> (byte & 63)) & 1 != 0
    }

    /// Takes `byte` from the stack `(pos, parent)`: pushes the tops of the resulting stacks onto
    /// `out`, popping through frames that complete first.
    #[inline]
    fn expand(
        &self,
        arena: &mut Vec<Node>,
        mut pos: u32,
        mut parent: u32,
        byte: u8,
        out: &mut Vec<u32>,
        flags: &mut StepFlags,
    ) {
        loop {
            let c = &self.closures[pos as usize];
            if (c.first[(byte >> 6) as usize] >> (byte & 63)) & 1 != 0 {
                if c.table != NO_TABLE {
                    let t = c.table as usize + byte as usize;
                    let (a, b) = (self.byte_table[t] as usize, self.byte_table[t + 1] as usize);
                    for &i in &self.byte_items[a..b] {
                        let (s, e) = self.items[i as usize];
                        self.push_item(arena, &self.pool[s as usize..e as usize], parent, out);
                    }
                } else {
                    for &(s, e) in &self.items[c.items_start as usize..c.items_end as usize] {
                        let seq = &self.pool[s as usize..e as usize];
                        if self.term_has(seq[seq.len() - 1], byte) {
                            self.push_item(arena, seq, parent, out);
                        }
                    }
                }
            }
            if !c.returns {
                return;
            }
            match parent {
                ROOT => return,
                BOTTOM => {
                    // The bottom known frame's rule completes: the byte is the context's, and
                    // only a byte that can follow that rule somewhere can be taken there.
                    let f = &self.follow[self.rule_of[pos as usize] as usize];
                    if (f[(byte >> 6) as usize] >> (byte & 63)) & 1 != 0 {
                        flags.ctx = true;
                    }
                    return;
                }
                _ => {
                    let n = arena[parent as usize];
                    pos = n.pos;
                    parent = n.parent;
                }
            }
        }
    }

    /// Pushes an item's frames over `parent`, its terminal already taken: the new top is the
    /// terminal's successor.
    #[inline]
    fn push_item(&self, arena: &mut Vec<Node>, seq: &[u32], parent: u32, out: &mut Vec<u32>) {
        let (&term, frames) = seq.split_last().expect("an item ends in a terminal");
        let mut p = parent;
        for &q in frames {
            arena.push(Node { pos: q, parent: p });
            p = (arena.len() - 1) as u32;
        }
        arena.push(Node {
            pos: term + 1,
            parent: p,
        });
        out.push((arena.len() - 1) as u32);
    }

    /// The stacks whose tops are `tops[from]`, advanced by `byte`: new tops appended to `tops`
    /// (deduplicated). Returns the flags.
    #[inline]
    pub(crate) fn advance(
        &self,
        arena: &mut Vec<Node>,
        tops: &mut Vec<u32>,
        from: std::ops::Range<usize>,
        byte: u8,
    ) -> StepFlags {
        let mut flags = StepFlags::default();
        let out_start = tops.len();
        for k in from {
            let n = arena[tops[k] as usize];
            self.expand(arena, n.pos, n.parent, byte, tops, &mut flags);
        }
        dedup(arena, tops, out_start);
        flags
    }

    /// Whether the stack with top `top` can end with no more input.
    pub(crate) fn can_end(&self, arena: &[Node], top: u32) -> CanEnd {
        let mut n = arena[top as usize];
        loop {
            if !self.closures[n.pos as usize].returns {
                return CanEnd::No;
            }
            match n.parent {
                ROOT => return CanEnd::Root,
                BOTTOM => return CanEnd::Context,
                p => n = arena[p as usize],
            }
        }
    }

    /// Whether the stack with top `top` can take another byte.
    pub(crate) fn can_continue(&self, arena: &[Node], top: u32) -> bool {
        let mut n = arena[top as usize];
        loop {
            let c = &self.closures[n.pos as usize];
            if c.first != [0; 4] {
                return true;
            }
            if !c.returns || n.parent >= BOTTOM {
                return false;
            }
            n = arena[n.parent as usize];
        }
    }

    /// The initial state: one stack at the start of `root`.
    pub(crate) fn initial(&self, arena: &mut Vec<Node>, tops: &mut Vec<u32>) {
        arena.push(Node {
            pos: self.start,
            parent: ROOT,
        });
        tops.push((arena.len() - 1) as u32);
    }
}

/// Removes duplicate stacks among `tops[start..]`.
pub(crate) fn dedup(arena: &[Node], tops: &mut Vec<u32>, start: usize) {
    let seg = &mut tops[start..];
    if seg.len() < 2 {
        return;
    }
    seg.sort_unstable_by_key(|&n| {
        let x = arena[n as usize];
        (x.pos, x.parent)
    });
    let mut w = start + 1;
    for r in start + 1..tops.len() {
        let (a, b) = (arena[tops[w - 1] as usize], arena[tops[r] as usize]);
        if a != b {
            tops[w] = tops[r];
            w += 1;
        }
    }
    tops.truncate(w);
    if tops.len() - start > DEEP_DEDUP_THRESHOLD {
        let mut seen: HashSet<Vec<u32>> = HashSet::new();
        let mut w = start;
        for r in start..tops.len() {
            let mut key = Vec::new();
            let mut n = tops[r];
            while n < BOTTOM {
                let x = arena[n as usize];
                key.push(x.pos);
                n = x.parent;
            }
            key.push(n);
            if seen.insert(key) {
                tops[w] = tops[r];
                w += 1;
            }
        }
        tops.truncate(w);
    }
}

fn or(a: &mut [u64; 4], b: &[u64; 4]) -> bool {
    let mut changed = false;
    for (x, y) in a.iter_mut().zip(b) {
        let n = *x | y;
        changed |= n != *x;
        *x = n;
    }
    changed
}

/// FOLLOW sets of the byte-level rules: the bytes that can come right after each rule completes.
fn follow_sets(elems: &[PElem], sets: &[[u64; 4]], rule_alts: &[Vec<u32>]) -> Vec<[u64; 4]> {
    let n = rule_alts.len();
    let mut nullable = vec![false; n];
    let mut first = vec![[0u64; 4]; n];
    // The FIRST set and nullability of the suffix of an alternative starting at `p`.
    let suffix = |p: u32, nullable: &[bool], first: &[[u64; 4]]| -> ([u64; 4], bool) {
        let mut f = [0u64; 4];
        let mut p = p as usize;
        loop {
            match elems[p] {
                PElem::End => return (f, true),
                PElem::Term => {
                    or(&mut f, &sets[p]);
                    return (f, false);
                }
                PElem::Ref(x) => {
                    or(&mut f, &first[x as usize]);
                    if !nullable[x as usize] {
                        return (f, false);
                    }
                    p += 1;
                }
            }
        }
    };
    loop {
        let mut changed = false;
        for r in 0..n {
            for &a in &rule_alts[r] {
                let (f, null) = suffix(a, &nullable, &first);
                changed |= or(&mut first[r], &f);
                if null && !nullable[r] {
                    nullable[r] = true;
                    changed = true;
                }
            }
        }
        if !changed {
            break;
        }
    }
    let mut follow = vec![[0u64; 4]; n];
    loop {
        let mut changed = false;
        for r in 0..n {
            for &a in &rule_alts[r] {
                let mut p = a as usize;
                while elems[p] != PElem::End {
                    if let PElem::Ref(b) = elems[p] {
                        let (f, null) = suffix(p as u32 + 1, &nullable, &first);
                        let mut add = f;
                        if null {
                            let fr = follow[r];
                            or(&mut add, &fr);
                        }
                        changed |= or(&mut follow[b as usize], &add);
                    }
                    p += 1;
                }
            }
        }
        if !changed {
            break;
        }
    }
    follow
}

struct ClosureBuilder<'a> {
    elems: &'a [PElem],
    rule_alts: &'a [Vec<u32>],
    rule_of: &'a [u32],
    names: &'a [String],
    /// 0 not started, 1 in progress, 2 done.
    state: Vec<u8>,
    done: Vec<(Vec<Vec<u32>>, bool)>,
    pool_size: usize,
}

impl ClosureBuilder<'_> {
    fn closure(&mut self, p: u32, depth: usize) -> Result<()> {
        let pi = p as usize;
        match self.state[pi] {
            2 => return Ok(()),
            1 => {
                let name = &self.names[self.rule_of[pi] as usize];
                return Err(grammar_error(format!(
                    "left recursion: rule '{name}' can reach itself without consuming input \
                     (llama.cpp refuses this too); rewrite it with repetition, e.g. `x ::= y (op y)*`"
                )));
            }
            _ => {}
        }
        if depth > MAX_CLOSURE_DEPTH {
            let name = &self.names[self.rule_of[pi] as usize];
            return Err(grammar_error(format!(
                "rule '{name}': rules nest deeper than {MAX_CLOSURE_DEPTH} without consuming input"
            )));
        }
        self.state[pi] = 1;
        let result = match self.elems[pi] {
            PElem::End => (Vec::new(), true),
            PElem::Term => (vec![vec![p]], false),
            PElem::Ref(r) => {
                let cont = p + 1;
                let tail = self.elems[cont as usize] == PElem::End;
                let mut seqs: Vec<Vec<u32>> = Vec::new();
                let mut seen: HashSet<Vec<u32>> = HashSet::new();
                let mut returns = false;
                let mut nullable = false;
                for &a in &self.rule_alts[r as usize] {
                    self.closure(a, depth + 1)?;
                    let (inner, ret) = &self.done[a as usize];
                    nullable |= *ret;
                    for item in inner {
                        let seq: Vec<u32> = if tail {
                            item.clone()
                        } else {
                            std::iter::once(cont).chain(item.iter().copied()).collect()
                        };
                        if seen.insert(seq.clone()) {
                            seqs.push(seq);
                        }
                    }
                }
                if nullable {
                    self.closure(cont, depth + 1)?;
                    let (inner, ret) = &self.done[cont as usize];
                    returns |= *ret;
                    for item in inner {
                        if seen.insert(item.clone()) {
                            seqs.push(item.clone());
                        }
                    }
                }
                (seqs, returns)
            }
        };
        self.pool_size += result.0.iter().map(|s| s.len()).sum::<usize>();
        if self.pool_size > MAX_CLOSURE_POOL {
            let name = &self.names[self.rule_of[pi] as usize];
            return Err(grammar_error(format!(
                "grammar too ambiguous to compile: the expansions around rule '{name}' exceed \
                 {MAX_CLOSURE_POOL} entries"
            )));
        }
        self.done[pi] = result;
        self.state[pi] = 2;
        Ok(())
    }
}
