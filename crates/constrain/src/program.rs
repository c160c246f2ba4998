//! The grammar lowered to bytes, and the pushdown recogniser that runs it.
//!
//! Lowering turns every character set into byte-level terminals (ASCII sets become one byte set;
//! other sets become the UTF-8 byte sequences of their ranges, inlined when there is one, else a
//! helper rule of alternatives), drops alternatives that can never complete, and lays every
//! alternative out in one flat array of positions ending in `End`.
//!
//! A parse stack is a chain of [`Node`]s (`pos`, `parent`) in an arena: the top is always a
//! terminal position, the frames below are continuation positions (where to resume once the
//! frame above completes). For every position the *closure* is precomputed: the frame sequences
//! to push (ending in a terminal) and whether the position can complete without consuming input.
//! Advancing a stack by a byte is then: test the top's byte set, replace the top by the closure
//! of the next position, and on completion pop into the parent frame and apply its closure.
//! Rule references in tail position are not kept as frames (tail calls), so right recursion
//! (`x*`) keeps the stack flat. Left recursion makes a closure infinite and is refused.

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
    /// Some stack completed `root` at this byte.
    pub accept: bool,
    /// Some truncated stack popped below its known frames at this byte.
    pub ctx: bool,
}

#[derive(Clone, Copy, Debug, Default)]
struct Closure {
    items_start: u32,
    items_end: u32,
    returns: bool,
}

#[derive(Debug)]
pub(crate) struct Program {
    /// Per position: the 256-bit byte set (terminals only).
    sets: Vec<[u64; 4]>,
    closures: Vec<Closure>,
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
            for s in seqs {
                let st = pool.len() as u32;
                pool.extend_from_slice(&s);
                items.push((st, pool.len() as u32));
            }
            closures.push(Closure {
                items_start,
                items_end: items.len() as u32,
                returns,
            });
        }
        Ok(Program {
            sets,
            closures,
            items,
            pool,
            start,
        })
    }

    /// Whether terminal position `pos` accepts `byte`.
    #[inline]
    pub(crate) fn term_has(&self, pos: u32, byte: u8) -> bool {
        let s = &self.sets[pos as usize];
        (s[(byte >> 6) as usize] >> (byte & 63)) & 1 != 0
    }

    /// Replaces a frame at `pos` over `parent` by its closure: pushes the resulting stacks' tops
    /// onto `out`, popping through completed frames.
    #[inline]
    pub(crate) fn apply(
        &self,
        arena: &mut Vec<Node>,
        mut pos: u32,
        mut parent: u32,
        out: &mut Vec<u32>,
        flags: &mut StepFlags,
    ) {
        loop {
            let c = self.closures[pos as usize];
            for &(s, e) in &self.items[c.items_start as usize..c.items_end as usize] {
                let mut p = parent;
                for &q in &self.pool[s as usize..e as usize] {
                    arena.push(Node { pos: q, parent: p });
                    p = (arena.len() - 1) as u32;
                }
                out.push(p);
            }
            if !c.returns {
                return;
            }
            match parent {
                ROOT => {
                    flags.accept = true;
                    return;
                }
                BOTTOM => {
                    flags.ctx = true;
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
            if !self.term_has(n.pos, byte) {
                continue;
            }
            self.apply(arena, n.pos + 1, n.parent, tops, &mut flags);
        }
        dedup(arena, tops, out_start);
        flags
    }

    /// The initial state: the closure of `root`.
    pub(crate) fn initial(&self, arena: &mut Vec<Node>, tops: &mut Vec<u32>) -> StepFlags {
        let mut flags = StepFlags::default();
        let start = tops.len();
        self.apply(arena, self.start, ROOT, tops, &mut flags);
        dedup(arena, tops, start);
        flags
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
